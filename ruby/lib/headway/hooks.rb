# frozen_string_literal: true

module Headway
  # `--hooks FILE.rb`: what a Rack worker process runs at the two ends of its life, in Puma's words.
  # The file is Ruby evaluated in a Hooks object:
  #
  #   on_worker_boot { |worker| ActiveRecord::Base.establish_connection }
  #   on_worker_shutdown { |worker| Metrics.flush }
  #
  # `on_worker_boot` blocks run in each worker once config.ru is loaded (with --preload, right
  # after the fork), before it serves; `on_worker_shutdown` blocks as it stops cleanly.
  # `worker.index` is its number (1..W), `worker.pid` its pid. With --preload, `before_fork { }`
  # blocks run once in the preloaded parent, after loading and before the first fork (to close
  # what the workers must not share); without it they have no place and do not run.
  class Hooks
    Worker = Struct.new(:index, :pid)

    # The hooks of FILE; none for nil.
    def self.load(path)
      hooks = new
      hooks.instance_eval(File.read(path), File.expand_path(path)) if path
      hooks
    end

    def initialize
      @before_fork = []
      @boot = []
      @shutdown = []
    end

    def before_fork(&block)
      @before_fork << block
    end

    def on_worker_boot(&block)
      @boot << block
    end

    def on_worker_shutdown(&block)
      @shutdown << block
    end

    def forking
      @before_fork.each(&:call)
    end

    def booted(worker)
      @boot.each { |hook| hook.call(worker) }
    end

    def shutting_down(worker)
      @shutdown.each { |hook| hook.call(worker) }
    end
  end
end
