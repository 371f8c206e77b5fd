# The Rails test app (tests/apps/rails) as the benchmarks serve it, in production as Puma users run
# it: RAILS_ENV=production with eager loading on (the app's own settings), the secret key base from
# $SECRET_KEY_BASE (the script sets one, the same for every worker), and Rails' log in a file,
# $RAILS_LOG_FILE, as Rails' log/production.log: on stderr it would reach the log through headway's
# front a line at a time and straight through Puma's. bench/versus.sh (PARTS=rails) and
# bench/preload-memory.py run it.
ENV["RAILS_ENV"] = "production"
abort "bench/rails.ru: set SECRET_KEY_BASE and RAILS_LOG_FILE" unless ENV["SECRET_KEY_BASE"] && ENV["RAILS_LOG_FILE"]

require_relative "../tests/apps/rails/config/application"

HeadwayRails::Application.config.logger = ActiveSupport::Logger.new(ENV["RAILS_LOG_FILE"])

require_relative "../tests/apps/rails/config/environment"

run Rails.application
