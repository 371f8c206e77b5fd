# frozen_string_literal: true

module Headway
  # `--hooks FILE.rb`: what a Rack worker process runs at the two ends of its life, in Puma's words.
  # The file is Ruby evaluated in a Hooks object:
  #
  #   on_worker_boot { |worker| ActiveRecord::Base.establish_connection }
  #   on_worker_shutdown { |worker| Metrics.flush }
  #
  # `on_worker_boot` blocks run in each worker once config.ru is loaded, before it serves;
  # `on_worker_shutdown` blocks as it stops cleanly. `worker.index` is its number (1..W),
  # `worker.pid` its pid. Puma's `before_fork` has no place until the worker preloads.
  class Hooks
    Worker = Struct.new(:index, :pid)

    # The hooks of FILE; none for nil.
    def self.load(path)
      hooks = new
      hooks.instance_eval(File.read(path), File.expand_path(path)) if path
      hooks
    end

    def initialize
      @boot = []
      @shutdown = []
    end

    def on_worker_boot(&block)
      @boot << block
    end

    def on_worker_shutdown(&block)
      @shutdown << block
    end

    def booted(worker)
      @boot.each { |hook| hook.call(worker) }
    end

    def shutting_down(worker)
      @shutdown.each { |hook| hook.call(worker) }
    end
  end
end
