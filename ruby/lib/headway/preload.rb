# frozen_string_literal: true

require "socket"

module Headway
  # The preloaded parent of `headway serve --preload config.ru`, the Ruby counterpart of
  # python/headway/worker/preload.py, started by the front as
  #
  #   ruby -I LIB -r headway/worker -e 'exit Headway::Worker.main(ARGV)' -- \
  #     --threads T --workers W [--hooks FILE.rb] config.ru --preload
  #
  # Loads config.ru once, runs the hooks' `before_fork` blocks, compacts the heap (`GC.compact`, so that what loading made sits in
  # pages the workers keep sharing), says "ready" to the front on the socket named by
  # $HEADWAY_ZYGOTE, then forks a worker each time the front asks: the request is the worker's
  # number, socket path and CPU, with the descriptors of its shared memory (SCM_RIGHTS); the
  # answer is the child's pid. The child serves exactly as a worker the front starts. Why the front
  # asks for each worker: see crates/server/src/workers/zygote.rs.
  #
  # A child lives as long as the front, not as this process: it watches the front's pidfd and
  # ends with it, and keeps serving if this process dies (the front starts a new parent when it
  # next needs a worker).
  module Preload
    # The largest control message a fork request carries: four descriptors and the headers.
    CONTROL_BYTES = 256

    # Serves fork requests until the front closes the channel; returns the exit status.
    def self.main(app, hooks, options)
      channel = Socket.for_fd(Integer(ENV.delete("HEADWAY_ZYGOTE")))
      front = Native.pidfd_open(Process.ppid)
      hooks.forking
      compact
      Worker.log("pid #{Process.pid} loaded #{options.config}; forking workers from it")
      channel.sendmsg("ready")
      loop do
        message, _, _, *controls = channel.recvmsg(4096, 0, CONTROL_BYTES, scm_rights: true)
        return 0 if message.empty? # the front is gone

        fds = controls.flat_map(&:unix_rights)
        index, socket, cpu = message.split("\0", -1)
        pid = Process.fork { exit!(serve_child(app, hooks, options, index, socket, cpu, fds, front)) }
        Process.detach(pid)
        fds.each(&:close)
        channel.sendmsg(pid.to_s)
      end
    end

    # Moves the loaded app's objects together, where the Ruby can, before the workers share them.
    def self.compact
      GC.compact if GC.respond_to?(:compact)
    rescue NotImplementedError
      nil
    end

    # Runs in the forked worker; returns its exit status.
    def self.serve_child(app, hooks, options, index, socket, cpu, fds, front)
      Process.setpgid(0, 0) # a group of its own, as a worker the front starts: signals, memory
      exit_with(front)
      Native.pin_to_cpu(Integer(cpu)) unless cpu.empty? # --cpu-affinity, before any thread starts
      # The core owns the shared memory's descriptors now: Ruby must not close them.
      fds.each { |io| io.autoclose = false }
      ENV["HEADWAY_HOP"] = fds.map(&:fileno).join(",")
      ENV["HEADWAY_WORKER"] = index
      status = Worker.run(app, hooks, options.dup.tap { |mine| mine.socket = socket })
      $stdout.flush
      status
    rescue Exception => error # rubocop:disable Lint/RescueException -- the child must exit with a status
      $stderr.puts(error.full_message(highlight: false))
      1
    end

    # Kills this process once the front (its pidfd `front`) has exited: what PR_SET_PDEATHSIG does
    # for a worker the front starts, which here would tie the worker to this parent instead.
    def self.exit_with(front)
      watched = IO.for_fd(front, autoclose: false)
      Thread.new do
        IO.select([watched])
        Process.kill(:KILL, Process.pid)
      end
    end
  end
end
