# frozen_string_literal: true

# The platform gem scripts/dist builds: the headway front (the standalone binary, libexec/headway)
# behind the `headway` executable, the Rack worker's Ruby side (lib/headway) and its extension
# prebuilt for each Ruby ABI (lib/headway/MAJOR.MINOR/headway_rack.so). It is built from
# scripts/dist's staging folder, which holds lib/headway/version.rb (the workspace's version and
# the target's platform); the gem carries this file, so an unpacked copy is a `path:` gem too.
require_relative "lib/headway/version"

Gem::Specification.new do |spec|
  spec.name = "headway"
  spec.version = Headway::VERSION
  spec.platform = Headway::PLATFORM
  spec.summary = "An application server with a Rust front: Rack apps in headway's own Ruby worker, " \
                 "any language's through --cmd"
  spec.authors = ["headway"]
  spec.licenses = ["MIT", "Apache-2.0"]
  spec.required_ruby_version = ">= 2.7"
  spec.files = Dir.chdir(__dir__) do
    ["headway.gemspec", "bin/headway", "libexec/headway"] + Dir["lib/**/*.rb"] + Dir["lib/headway/*/headway_rack.so"]
  end
  spec.bindir = "bin"
  spec.executables = ["headway"]
  spec.require_paths = ["lib"]
  # The worker requires Rack; the app's Gemfile usually names it already.
  spec.add_dependency "rack", ">= 2.2", "< 4"
end
