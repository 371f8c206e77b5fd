# A Rails app with no database: only the frameworks the tests use (controllers, views and
# ActionCable with its in-process `async` adapter), configured here rather than in
# config/environments/ so that the whole app is a few files.
ENV["RAILS_ENV"] ||= "production"

require "rails"
require "action_controller/railtie"
require "action_view/railtie"
require "action_cable/engine"

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
    config.action_cable.mount_path = "/cable"
    config.action_cable.cable = { "adapter" => "async" }
    # The tests' clients send no Origin.
    config.action_cable.disable_request_forgery_protection = true
  end
end
