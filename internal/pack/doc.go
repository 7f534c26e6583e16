// Package pack turns the code and files a run carries (a configuration's
// `repos` and `files`) into one gzip'd tar each, and back: Git's view of a
// work tree (tracked files, untracked files not ignored, uncommitted
// changes) or a plain file or directory, with modes and modification
// times, in a fixed order so that an unchanged tree packs to the same
// bytes and its SHA-256 finds it on the server again (issue 16).
// Unpack writes an archive under one directory and nowhere else.
package pack
