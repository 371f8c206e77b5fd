# The Rails 6.1 app of tests/rack/test_rails.py (Debian's ruby-rails), run unmodified by the Rack
# worker: `headway serve tests/apps/rails/config.ru`.
require_relative "config/environment"

run Rails.application
