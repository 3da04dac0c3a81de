// The files of a call: those the supervisor puts before it, and those it
// changed, sent back after it.

import type { PyodideAPI } from "pyodide";
import type { PyRunner, RunFrame } from "./run.ts";

/** A package file of an install frame; see bridge.File. */
export interface PackageFile {
  name: string;
  install_dir?: string;
  /** Bytes; they follow in chunks. */
  size?: number;
}

/**
 * The files announced by an install or put frame, as their bytes arrive:
 * in chunks (bridge.ChunkSize), a file's before the next one's, each into
 * its own buffer of the announced size.
 */
export class Incoming {
  readonly data: Uint8Array[];
  private file = 0;
  private offset = 0;

  constructor(
    readonly type: "install" | "put" | "compile",
    readonly files: PackageFile[],
    /** Directories a put makes, even when no file goes into them. */
    readonly dirs: string[],
    /** Those of dirs that the code may not change: read-only mounts. */
    readonly readOnly: string[] = [],
  ) {
    this.data = files.map((f) => new Uint8Array(f.size ?? 0));
    this.skipEmpty();
  }

  /** Every announced byte has arrived. */
  get complete(): boolean {
    return this.file >= this.files.length;
  }

  /**
   * Takes the next chunk and reports whether every file is complete; throws
   * for a chunk beyond the files announced, which the runner cannot go on
   * from.
   */
  add(chunk: Uint8Array): boolean {
    const buf = this.data[this.file];
    if (!buf || this.offset + chunk.length > buf.length) {
      throw new Error("a binary frame beyond the files announced");
    }
    buf.set(chunk, this.offset);
    this.offset += chunk.length;
    if (this.offset === buf.length) {
      this.file++;
      this.offset = 0;
      this.skipEmpty();
    }
    return this.complete;
  }

  private skipEmpty() {
    while (this.file < this.files.length && this.data[this.file].length === 0) this.file++;
  }
}

/** What a file looked like before the run, to tell what the run changed. */
export type Stat = { size: number; mtime: number };

/** Most files looked at in one watched directory: a bound on the cost of a hostile tree. */
export const maxScan = 10_000;

/** The regular files under a watched directory; cut when there were more than maxScan. */
export interface Scan {
  dir: string;
  files: Map<string, Stat>;
  cut: boolean;
}

/**
 * The regular files under each watched directory. Symlinks are neither
 * followed nor reported: the host never gets one. __pycache__ is Python's
 * own and not reported either.
 */
export function scanAll(py: PyodideAPI, dirs: string[]): Scan[] {
  if (dirs.length === 0) return []; // nothing watched (--files=false): no look at the file system
  const FS = py.FS;
  return dirs.map((d) => {
    const scan: Scan = { dir: d.replace(/\/+$/, ""), files: new Map(), cut: false };
    const walk = (dir: string) => {
      let names: string[];
      try {
        names = FS.readdir(dir);
      } catch {
        return; // not there (yet)
      }
      for (const name of names) {
        if (name === "." || name === ".." || name === "__pycache__") continue;
        if (scan.files.size >= maxScan) {
          scan.cut = true;
          return;
        }
        const path = `${dir}/${name}`;
        const st = FS.lstat(path);
        if (FS.isDir(st.mode)) walk(path);
        else if (FS.isFile(st.mode)) scan.files.set(path, { size: st.size, mtime: +st.mtime });
      }
    };
    walk(scan.dir);
    return scan;
  });
}

/** One entry of a files frame; see bridge.Change. */
export interface Change {
  path: string;
  size?: number;
  deleted?: boolean;
  omitted?: boolean;
}

/** What a run changed in the watched directories: see diff. */
export interface Diff {
  /**
   * The files created or changed, by path, those past the limit omitted;
   * then the files deleted.
   */
  changes: Change[];
  /**
   * The watched directories cut before or after the run (more than maxScan
   * files), where nothing counts as deleted: a file not seen may be past the
   * cut rather than gone, and deleting it on the host would lose data the
   * code never touched.
   */
  cut: string[];
}

/**
 * Compares the scans of the watched directories before and after a run,
 * in the same order; limit is the bytes of changed files sent back.
 */
export function diff(before: Scan[], after: Scan[], limit: number): Diff {
  const changes: Change[] = [];
  const cut: string[] = [];
  let left = limit;
  const was = (path: string) => before.find((b) => b.files.has(path))?.files.get(path);
  // Watched directories may nest: each file is reported once.
  const now = new Map(after.flatMap((a) => [...a.files]));
  for (const [path, st] of [...now].sort(([a], [b]) => a < b ? -1 : 1)) {
    const old = was(path);
    if (old && old.size === st.size && old.mtime === st.mtime) continue;
    if (st.size > left) {
      changes.push({ path, size: st.size, omitted: true });
      continue;
    }
    left -= st.size;
    changes.push({ path, size: st.size });
  }
  const gone = new Set<string>();
  for (const [i, b] of before.entries()) {
    if (b.cut || after[i]!.cut) {
      cut.push(b.dir);
      continue;
    }
    for (const path of b.files.keys()) {
      if (!now.has(path)) gone.add(path);
    }
  }
  for (const path of gone) changes.push({ path, deleted: true });
  return { changes, cut };
}

/**
 * Sends the files frame: the files the run created, changed or deleted in
 * the watched directories, and the figures it made; then the bytes of each
 * changed file within the limit and of each figure, in that order.
 * Returns the watched files it compared with before.
 */
export function sendFiles(
  py: PyodideAPI,
  runner: PyRunner,
  before: Scan[],
  msg: RunFrame,
  post: (frame: string | Uint8Array) => void,
): Scan[] {
  const data: Uint8Array[] = [];
  const after = scanAll(py, msg.watch ?? []);
  let changes: Change[] = [];
  if (msg.watch?.length) {
    const found = diff(before, after, msg.files_limit || Infinity);
    for (const dir of found.cut) {
      post(JSON.stringify({
        type: "output",
        stream: "stderr",
        lines: [
          `[more than ${maxScan} files under ${dir}: only the first were looked at, and none there counts as deleted]`,
        ],
      }));
    }
    changes = found.changes;
    for (const c of changes) if (!c.deleted && !c.omitted) data.push(py.FS.readFile(c.path));
  }
  const figures: { mime_type: string; size: number }[] = [];
  const made = runner.take_figures();
  try {
    // Most runs make none, and converting even an empty list cost 0.4 ms
    // of a warm call: Pyodide's conversion runs cold in a fresh isolate.
    for (const [mime, bytes] of made.length > 0 ? made.toJs() : []) {
      figures.push({ mime_type: mime, size: bytes.length });
      data.push(bytes);
    }
  } finally {
    made.destroy();
  }
  if (changes.length === 0 && figures.length === 0) return after;
  post(JSON.stringify({ type: "files", changes, figures }));
  for (const d of data) post(d);
  return after;
}

/** Writes files the supervisor put, and leaves their times at 0 so that any write by the code shows. */
export function put(
  py: PyodideAPI,
  dirs: string[],
  readOnly: string[],
  files: PackageFile[],
  data: Uint8Array[],
): string {
  const FS = py.FS;
  try {
    for (const dir of dirs) FS.mkdirTree(dir);
    for (const [i, file] of files.entries()) {
      const path = file.name;
      FS.mkdirTree(path.slice(0, path.lastIndexOf("/")) || "/");
      FS.writeFile(path, data[i]!);
      FS.utime(path, 0, 0);
    }
    const writable = dirs.filter((d) => !readOnly.includes(d));
    for (const dir of readOnly) protect(py, dir, writable);
    return JSON.stringify({ type: "put" });
  } catch (e) {
    return JSON.stringify({ type: "put", error: String(e) });
  }
}

/**
 * Makes the tree at dir read-only, but for the writable mounts in it: what
 * the code would change there raises OSError(EROFS) in Python, as on a
 * read-only mount, instead of vanishing (a read-only mount's changes never
 * go back to the host). Emscripten ignores permission bits, so each node's
 * operations refuse instead: creating, removing, renaming, opening for
 * writing, changing attributes; and a rename into the tree, which only the
 * source directory's operations see, is refused by a wrapper of FS.rename.
 */
export function protect(py: PyodideAPI, dir: string, writable: string[]) {
  const FS = py.FS;
  const refuse = () => {
    throw new FS.ErrnoError(py.ERRNO_CODES.EROFS);
  };
  if (!FS.readOnlyDirs) {
    const dirs = new WeakSet();
    const rename = FS.rename;
    FS.rename = (from: string, to: string) => {
      if (dirs.has(FS.lookupPath(to, { parent: true }).node)) refuse();
      return rename(from, to);
    };
    FS.readOnlyDirs = dirs;
  }
  const walk = (path: string) => {
    const node = FS.lookupPath(path).node;
    if (FS.isDir(node.mode)) {
      FS.readOnlyDirs.add(node);
      node.node_ops = {
        ...node.node_ops,
        mknod: refuse,
        rename: refuse,
        unlink: refuse,
        rmdir: refuse,
        symlink: refuse,
        setattr: refuse,
      };
      for (const name of FS.readdir(path)) {
        const child = `${path}/${name}`;
        if (name !== "." && name !== ".." && !writable.includes(child)) walk(child);
      }
    } else if (FS.isFile(node.mode)) {
      const open = node.stream_ops.open;
      node.node_ops = { ...node.node_ops, setattr: refuse };
      node.stream_ops = {
        ...node.stream_ops,
        // O_WRONLY or O_RDWR: refused when opened, not at the first write.
        open: (stream: { flags: number }) => (stream.flags & 3 ? refuse() : open?.(stream)),
        write: refuse,
      };
    }
  };
  walk(dir);
}
