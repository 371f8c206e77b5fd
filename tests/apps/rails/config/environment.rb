# Loads and starts the app, as every Rails app's config/environment.rb.
require_relative "application"

Rails.application.initialize!

# Written once the app is loaded, so that the --preload tests can tell where and how often.
File.write(ENV["RAILS_LOADED_LOG"], "#{Process.pid}\n", mode: "a") if ENV["RAILS_LOADED_LOG"]
