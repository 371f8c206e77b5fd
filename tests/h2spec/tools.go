//go:build tools

// Package tools pins h2spec, the HTTP/2 conformance suite the tests run (tests/server/test_http2.py),
// and its dependencies: h2spec v2 has no go.mod of its own, so without this module `go install`
// would take whatever versions of them are newest. scripts/setup --test installs it from here.
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
