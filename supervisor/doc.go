// Package supervisor keeps a pool of sandboxed Deno workers that run Python
// through Pyodide, hands one to each call, and retires it afterwards so every
// call starts from a pristine interpreter.
package supervisor
