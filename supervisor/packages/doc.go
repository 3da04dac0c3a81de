// Package packages resolves and fetches the Python packages a call needs,
// on the trusted Go side, so that the sandboxed worker never needs the
// network (or micropip) to install its dependencies.
//
// The flow for one call:
//
//  1. [FromCode] reads the requirements of a PEP 723 "# /// script" block.
//     Without one, the caller finds the imports inside Pyodide
//     (pyodide.code.find_imports) and maps them to package names with
//     [InferImports] and the import table of Pyodide's lock file
//     ([Lock.ImportTable]).
//  2. A [Resolver] turns PEP 508 requirement strings into a [Plan]: Pyodide's
//     built-in packages come from its lock file ([Lock], one version each,
//     used whenever it satisfies the requirements; a pure-Python one may
//     otherwise come from the index), everything else from a PyPI-style simple index
//     ([Index]: PEP 503 HTML or PEP 691 JSON, PEP 658 metadata files when
//     offered). Only wheels that run in Pyodide are chosen (pure Python,
//     cp314 abi3/none, or Pyodide's own platform tag).
//  3. A [Cache] downloads the plan's files into a content-addressed cache
//     (<dir>/wheels/sha256/<hex>/<file name>), checks every file against the
//     sha256 the lock file or the index gave, and returns local paths the
//     worker can install from. In offline mode it only answers from the cache.
//
// Every failure a user should see is an [*Error] with a [Kind] and a message
// such as
//
//	cannot install "foo>=2": no version of foo matches >=2 (available: 1.0, 1.1)
//
// Both the index and the Pyodide package host may be an http(s) URL or a
// local directory (an offline mirror). Progress lines (for MCP debug logs)
// go to a func(string) given with [Resolver.WithProgress] and
// [Cache.WithProgress].
package packages
