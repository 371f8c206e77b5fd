# A config.ru that raises while loading: the start must stop with its message.
raise ArgumentError, "this config.ru refuses to load"
