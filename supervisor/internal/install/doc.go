// Package install owns a call's packages on the trusted side: resolving
// and fetching them (Installer, over package packages), the rounds of
// installs from the code's imports and whether a learned set's worker fits
// them (Installer.FromImports), the note on a module no package was
// installed for, the --deps set a snapshot holds, the package sets learned
// from use and their snapshots (Learner), compiling wheels to bytecode
// (Bytecoder), and Fetch.
//
// It must not know the pool, a call's result or its progress reporting:
// it reaches a worker through Worker (the imports query, install), a
// compile worker through the start function it is given, and a call
// through a Line callback and a Progress, all handed in.
package install
