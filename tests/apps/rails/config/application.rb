# A Rails app with no database: only the frameworks the tests use (controllers and views),
# configured here rather than in config/environments/ so that the whole app is a few files.
ENV["RAILS_ENV"] ||= "production"

require "rails"
require "action_controller/railtie"
require "action_view/railtie"

module HeadwayRails
  class Application < Rails::Application
    config.load_defaults 6.1
    config.root = File.expand_path("..", __dir__)
    config.eager_load = true
    config.cache_classes = true
    config.consider_all_requests_local = false
    # Production refuses to boot without one; a test app's may be in the open.
    config.secret_key_base = "headway-rails-test-" + "0" * 64
    config.logger = ActiveSupport::Logger.new($stderr)
    config.log_level = :info
    # The tests' requests say `Host: test`.
    config.hosts.clear
  end
end
