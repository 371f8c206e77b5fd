# frozen_string_literal: true

# The entry of headway's Rack worker: the headway front starts it as
#
#   ruby -I LIB -r headway/worker -e 'exit Headway::Worker.main(ARGV)' -- \
#     --socket PATH --threads T --workers W [--hooks FILE.rb] [--root-path PATH] config.ru
#
# (with --preload instead of --socket, it is the preloaded parent the workers are forked from:
# headway/preload.rb).
#
# It loads config.ru with Rack::Builder, attaches to the slots the front passed down (or, run on
# its own, binds the unix socket PATH), makes T Ruby threads that each serve one slot through the
# native core (headway/headway_rack, crates/rack), and stops cleanly on SIGTERM or SIGINT: the
# slots take no new work, what is in flight finishes, the threads are joined.

require "optparse"
require "rack"
# Loaded before the app, as Puma has it: Rack 2.2's Lint checks SERVER_NAME with URI without
# requiring it.
require "uri"
require "headway/handler"
require "headway/handshakes"
require "headway/hooks"
require "headway/preload"

module Headway
  module Worker
    Options = Struct.new(:socket, :threads, :workers, :hooks, :config, :preload, :root_path)

    # Runs the worker as `argv` says; returns the exit status.
    def self.main(argv)
      options = parse(argv)
      return 1 unless require_extension
      app = load_app(options.config)
      hooks = app && load_hooks(options.hooks)
      return 1 unless hooks
      return Preload.main(app, hooks, options) if options.preload

      run(app, hooks, options)
    end

    # A worker's life once the app is loaded, whether started by the front or forked: the boot
    # hooks, serving until a stop signal, the shutdown hooks; returns the exit status.
    def self.run(app, hooks, options)
      worker = Hooks::Worker.new(Integer(ENV.fetch("HEADWAY_WORKER", "1")), Process.pid)
      hooks.booted(worker)
      status = serve(app, options)
      hooks.shutting_down(worker) if status.zero?
      status
    end

    # Loads the native extension: in the gem, the one built for this Ruby's ABI
    # (headway/MAJOR.MINOR/headway_rack.so); in a checkout, the one its build put beside this file.
    # Says what is wrong and returns false when there is none for this Ruby.
    def self.require_extension
      abi = RUBY_VERSION[/\A\d+\.\d+/]
      carried = Dir[File.join(__dir__, "*", "headway_rack.so")].map { |path| File.basename(File.dirname(path)) }
      if carried.include?(abi)
        require "headway/#{abi}/headway_rack"
      elsif carried.any?
        log("this headway gem carries the Rack worker's extension for Ruby #{carried.sort.join(", ")}, not for " \
            "#{RUBY_VERSION} (#{RbConfig.ruby}): run it under one of those (--ruby or $HEADWAY_RUBY), or run " \
            "the app in a server of its own with --cmd (--cmd 'puma -b unix://{socket} config.ru')")
        return false
      else
        require "headway/headway_rack"
      end
      true
    rescue LoadError => error
      log("the native extension is missing (#{error.message}): build it with scripts/setup --test " \
          "or `cargo build --release -p headway-rack` and copy it to ruby/lib/headway/headway_rack.so, " \
          "or set HEADWAY_RUBY_LIB to a folder that has it")
      false
    end

    def self.parse(argv)
      options = Options.new(ENV["HEADWAY_SOCKET"], 1, 1, nil, "config.ru", false, "")
      OptionParser.new do |parser|
        parser.banner = "usage: headway/worker [--socket PATH | --preload] [--threads T] [--workers W] [--root-path PATH] [config.ru]"
        parser.on("--socket PATH") { |path| options.socket = path }
        parser.on("--threads T", Integer) { |count| options.threads = count }
        parser.on("--workers W", Integer) { |count| options.workers = count }
        parser.on("--hooks FILE") { |path| options.hooks = path }
        parser.on("--preload") { options.preload = true }
        parser.on("--root-path PATH") { |path| options.root_path = path }
      end.parse!(argv)
      options.config = argv.first if argv.first
      abort("headway worker: --socket PATH is required (or set HEADWAY_SOCKET)") unless options.socket || options.preload
      abort("headway worker: --threads must be at least 1") if options.threads < 1
      options
    end

    # The app config.ru builds (Rack 2's parse_file gives it with the options, Rack 3's alone);
    # nil, with the error and its backtrace on stderr, if loading it raises.
    def self.load_app(config)
      built = Rack::Builder.parse_file(config)
      built.is_a?(Array) ? built.first : built
    rescue Exception => error # rubocop:disable Lint/RescueException -- a config.ru calling exit fails too
      $stderr.puts(error.full_message(highlight: false))
      log("cannot load #{config}: #{error.message} (#{error.class})")
      nil
    end

    # The hooks of FILE (none for nil); nil, with the error on stderr, if loading it raises.
    def self.load_hooks(path)
      Hooks.load(path)
    rescue Exception => error # rubocop:disable Lint/RescueException -- as for config.ru
      $stderr.puts(error.full_message(highlight: false))
      log("cannot load the hooks #{path}: #{error.message} (#{error.class})")
      nil
    end

    def self.serve(app, options)
      slots = Native::Slots.attach(options.socket, options.threads, options.root_path)
      handler = Handler.new(app, threads: options.threads, workers: options.workers)
      stop_read, stop_write = IO.pipe
      %w[TERM INT].each { |signal| trap(signal) { stop_write.write_nonblock(".", exception: false) } }
      threads = Array.new(options.threads) { |number| Thread.new { slots.run_slot(number, handler) } }
      # WebSocket handshakes come on the worker's socket when the slots are the front's hop.
      handshakes = Handshakes.new(options.socket, options.root_path, handler) if slots.hop?
      slots.announce_ready(!handshakes.nil?)
      log("pid #{Process.pid} serving #{options.config} #{slots.place} with #{options.threads} threads")
      stop_read.read(1)
      handshakes&.stop
      slots.stop
      threads.each(&:join)
      0
    rescue RuntimeError => error
      log(error.message)
      1
    end

    def self.log(message)
      $stderr.puts("headway worker: #{message}")
    end
  end
end
