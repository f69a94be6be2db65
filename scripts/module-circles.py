#!/usr/bin/env python3
"""Import circles between the source files of each crate of the workspace.

    python3 scripts/module-circles.py [--max N] [--json] [--edges] [--bare-paths]

Cargo refuses a circle between crates but not between the files of one
crate. This script draws, for every workspace crate, a graph whose nodes are
the crate's non-test source files and whose arrows are the references one
file makes to another, then prints every strongly connected component of
more than one file (a "circle": each of its files reaches every other one
through the arrows). For circles of more than 3 files it also prints one
shortest cycle through them, as an illustration; with `--edges`, every
arrow inside each circle with the `file:line` of each reference making it,
so someone can see what to cut.

What is a crate: each `members` entry of the root Cargo.toml (globs
expanded, `exclude` honoured) that is a folder with a Cargo.toml and a
src/. Its targets are the library (`[lib] path`, default src/lib.rs) and
the binaries (`[[bin]] path`, src/main.rs, src/bin/*.rs); each target's
module tree is walked from its root through the `mod x;` declarations
(`#[path = "…"]` honoured), which gives each file its module path the usual
way: src/lib.rs and src/main.rs are the crate root, src/a.rs or
src/a/mod.rs is `a`, src/a/b.rs is `a::b`. `crate::` in a binary names the
binary's own tree, not the library's.

Which files count: those the module tree reaches through declarations not
under `#[cfg(test)]` (nor `cfg(all(test, …))`), not named tests.rs and not
under a `tests/` folder inside src. Test modules declared with
`#[cfg(test)] mod x;` (proptests.rs, cycle_tests.rs, …) and files no `mod`
declares (templates read with include_str!, say) are left out and listed
as skipped in `--json`.

What is an arrow A -> B: a reference in A's code, outside `#[cfg(test)]`
items, to a path that resolves inside the crate to B:
  - `use crate::…`, `use super::…`, `use self::…`, grouped and nested
    (`use crate::{a::x, b::{c, d}}`, over several lines), `pub use` too;
  - paths in code: `crate::a::b::f(…)`, `super::x::Y`, `self::z::W`
    (`$crate` and `pub(in crate::…)` are not references);
  - with `--bare-paths`, also paths whose first segment is a child module
    of the current module (`use privacy::Tags;` in lib.rs, `file::load()`)
    or a module a `use` of the file brought into scope
    (`use crate::agent::tools;` then `tools::run()`), which Rust 2018 allows
    but the default count leaves out.
`super::` and `self::` are resolved against the current module (the file's
module plus any inline `mod name { … }` it is inside). The resolved path is
mapped to the longest prefix of it that is a module with a file of its own:
`crate::agent::tools::Tool` is agent/tools.rs if it exists, else
agent/mod.rs, else the crate root; re-exports are not followed, so
`crate::Memex` is lib.rs even when lib.rs re-exports it. A file's
`mod x;` declaration is not an arrow, and a file's references to itself
are dropped.

Heuristics, good enough for this workspace rather than a Rust parser:
comments (`//`, `/* */` nested, doc comments) and string, raw string,
byte and char literals are blanked before anything is read (a char literal
is told from a lifetime by its closing quote), so intra-doc links such as
[`crate::watch`] are not arrows; a `#[cfg(test)]` item ends at its first
`;` outside brackets or at the `}` closing a top-level `{`
(`use`/`const`/`static`/`let`/`type` items at their `;`); inline modules
are found by brace matching; aliases are per file, not per scope; macros
are not expanded.

Exit status: 1 if a circle has more than `--max` files (default 3), so CI
can run it; 0 otherwise. `--json` prints the same as JSON.
"""

import argparse
import bisect
import collections
import glob
import json
import os
import re
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11: the few keys needed are read by regex.
    tomllib = None

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ---------------------------------------------------------------- lexing --


def blank_out(src):
    """`src` with comments and literals replaced by spaces (newlines kept),
    so offsets and line numbers still match the original."""
    out = list(src)
    n = len(src)

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    def skip_quoted(k):
        # k is just after an opening '"': the offset after the closing one.
        while k < n:
            ch = src[k]
            if ch == "\\":
                k += 2
            elif ch == '"':
                return k + 1
            else:
                k += 1
        return n

    i = 0
    while i < n:
        c = src[i]
        if c == "/" and src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and src.startswith("/*", i):
            depth, j = 0, i
            while j < n:
                if src.startswith("/*", j):
                    depth += 1
                    j += 2
                elif src.startswith("*/", j):
                    depth -= 1
                    j += 2
                    if depth == 0:
                        break
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c.isalpha() or c == "_":
            m = IDENT.match(src, i)
            if m is None:  # a letter outside ASCII
                i += 1
                continue
            word, j = m.group(), m.end()
            if word in ("r", "br", "cr") and j < n and src[j] in '#"':
                k = j
                while k < n and src[k] == "#":
                    k += 1
                if k < n and src[k] == '"':
                    term = '"' + "#" * (k - j)
                    e = src.find(term, k + 1)
                    e = n if e < 0 else e + len(term)
                    blank(i, e)
                    i = e
                    continue
            if word in ("b", "c") and j < n and src[j] == '"':
                e = skip_quoted(j + 1)
                blank(i, e)
                i = e
                continue
            if word == "b" and j < n and src[j] == "'":
                i = j  # a byte char: handled as a char below
                continue
            i = j
        elif c == '"':
            e = skip_quoted(i + 1)
            blank(i, e)
            i = e
        elif c == "'":
            if i + 1 < n and src[i + 1] == "\\":
                e = src.find("'", i + 3)
                e = n if e < 0 else e + 1
                blank(i, e)
                i = e
            elif i + 2 < n and src[i + 2] == "'":
                blank(i, i + 3)
                i += 3
            else:
                i += 1  # a lifetime or a label
        else:
            i += 1
    return "".join(out)


CLOSE = {"(": ")", "[": "]", "{": "}"}


def match_bracket(code, i):
    """Offset just after the bracket closing the one at code[i]."""
    depth = 0
    n = len(code)
    j = i
    while j < n:
        ch = code[j]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return n


def match_bracket_back(code, j):
    """Offset of the bracket opening the one that closes at code[j]."""
    depth = 0
    while j >= 0:
        ch = code[j]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            depth -= 1
            if depth == 0:
                return j
        j -= 1
    return 0


def cfg_needs_test(expr):
    """Whether a cfg predicate (text inside `cfg(...)`) holds only in tests."""
    tokens = re.findall(r"[A-Za-z_]\w*|[(),=]|\S", expr)
    pos = 0

    def parse():
        nonlocal pos
        if pos >= len(tokens):
            return False
        name = tokens[pos]
        pos += 1
        if pos < len(tokens) and tokens[pos] == "(":
            pos += 1
            args = []
            while pos < len(tokens) and tokens[pos] != ")":
                if tokens[pos] == ",":
                    pos += 1
                    continue
                args.append(parse())
            pos += 1
            if name == "all":
                return any(args)
            if name == "any":
                return bool(args) and all(args)
            return False  # not(...) and the unknown
        if pos < len(tokens) and tokens[pos] == "=":
            pos += 2  # feature = "x" (the string is blanked)
            return False
        return name == "test"

    return parse()


CFG_ATTR = re.compile(r"#\s*!?\s*\[\s*cfg\s*\(")
ATTR = re.compile(r"#\s*!?\s*\[")
WORD_AT = re.compile(r"\s*(?:pub\s*(?:\([^)]*\))?\s*)?(?:(?:unsafe|async|default)\s+|const\s+(?=fn\b))*([A-Za-z_]\w*)(\s+[A-Za-z_]\w*)?")


def item_end(code, i):
    """End of the item (or statement) starting at code[i], after its
    attributes: see the module's docstring."""
    n = len(code)
    while True:  # further attributes
        m = re.compile(r"\s*#\s*\[").match(code, i)
        if not m:
            break
        i = match_bracket(code, m.end() - 1)
    m = WORD_AT.match(code, i)
    keyword = m.group(1) if m else ""
    after = (m.group(2) or "").strip() if m else ""
    to_semicolon = keyword in ("use", "const", "static", "let", "type") or (
        keyword == "extern" and after == "crate"
    )
    depth = 0
    j = i
    while j < n:
        ch = code[j]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0 and ch == "}" and not to_semicolon and code[match_bracket_back(code, j)] == "{":
                return j + 1
            if depth < 0:  # the enclosing block ended first
                return j
        elif ch == ";" and depth == 0:
            return j + 1
        j += 1
    return n


def test_ranges(code):
    """Ranges of `code` under a test-only cfg attribute."""
    ranges = []
    for m in CFG_ATTR.finditer(code):
        close = match_bracket(code, m.end() - 1)
        if not cfg_needs_test(code[m.end() : close - 1]):
            continue
        attr_end = match_bracket(code, code.index("[", m.start()))
        if code[m.start() : m.end()].replace(" ", "").startswith("#!"):
            ranges.append((0, len(code)))  # #![cfg(test)]: the whole file
            continue
        ranges.append((m.start(), item_end(code, attr_end)))
    return merge(ranges)


def merge(ranges):
    out = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def inside(ranges, pos):
    k = bisect.bisect_right(ranges, (pos, float("inf"))) - 1
    return k >= 0 and ranges[k][0] <= pos < ranges[k][1]


def mask(code, ranges):
    out = list(code)
    for a, b in ranges:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


# ------------------------------------------------------------- one file --

MOD_DECL = re.compile(
    r"(?<![\w$])(?:pub\s*(?:\([^)]*\))?\s*)?mod\s+(?:r#)?([A-Za-z_]\w*)\s*([;{])"
)
PATH_ATTR = re.compile(r'#\s*\[\s*path\s*=\s*(?:r#*)?"([^"]*)"')


class SourceFile:
    """One file read once: blanked code, test ranges, inline modules, `mod`
    declarations."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8", errors="replace") as f:
            self.src = f.read()
        self.code = blank_out(self.src)
        self.tests = test_ranges(self.code)
        self.live = mask(self.code, self.tests)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.src)]
        self.inline = []  # (start, end, name) of `mod name { … }`
        self.decls = []  # (name, path attr or None, inline names, is_test)
        for m in MOD_DECL.finditer(self.code):
            name, kind = m.group(1), m.group(2)
            if kind == "{":
                brace = m.end() - 1
                self.inline.append((brace, match_bracket(self.code, brace), name))
                continue
            is_test = inside(self.tests, m.start(1))
            path_attr = None
            # The attributes just before the declaration.
            j = m.start() - 1
            while j >= 0:
                while j >= 0 and self.code[j].isspace():
                    j -= 1
                if j < 0 or self.code[j] != "]":
                    break
                opening = match_bracket_back(self.code, j)
                hash_at = self.code.rfind("#", 0, opening)
                if hash_at < 0 or self.code[hash_at + 1 : opening].strip():
                    break
                found = PATH_ATTR.match(self.src, hash_at)
                if found:
                    path_attr = found.group(1)
                attr = self.code[hash_at : j + 1]
                cfg = re.match(r"#\s*\[\s*cfg\s*\((.*)\)\s*\]$", attr, re.S)
                if cfg and cfg_needs_test(cfg.group(1)):
                    is_test = True
                j = hash_at - 1
            self.decls.append((name, path_attr, self.inline_names(m.start()), is_test))

    def inline_names(self, pos):
        return tuple(name for a, b, name in sorted(self.inline) if a < pos < b)

    def line_of(self, pos):
        return bisect.bisect_right(self.line_starts, pos)

    def statement(self, start, end):
        """The declaration from its line's start to `end`, on one line."""
        a = self.line_starts[self.line_of(start) - 1]
        text = " ".join(self.src[a:end].split())
        return re.sub(r",?\s*\}", "}", re.sub(r"\{\s+", "{", text))

    def line_text(self, line):
        a = self.line_starts[line - 1]
        b = self.src.find("\n", a)
        return self.src[a : b if b >= 0 else len(self.src)].strip()


# ------------------------------------------------------- references -----

USE = re.compile(r"(?<![\w$#])use\s")
USE_TOKEN = re.compile(r"::|[{},;*]|(?:r#)?[A-Za-z_]\w*|\S")
PATH = re.compile(
    r"(?<![\w$#])((?:r#)?[A-Za-z_]\w*)((?:\s*::\s*(?:r#)?[A-Za-z_]\w*)+)"
)
PATH_SEGMENT = re.compile(r"(?:r#)?([A-Za-z_]\w*)")


def use_leaves(code, start):
    """Parse the use tree after the `use` at `start`: (end offset, leaves),
    each leaf (segments, offset of its last segment, alias or None)."""
    tokens = []
    for m in USE_TOKEN.finditer(code, start + 3):
        tokens.append((m.group(), m.start()))
        if m.group() == ";":
            break
    end = tokens[-1][1] + 1 if tokens else start + 3
    leaves = []
    pos = 0

    def tree(prefix):
        nonlocal pos
        segs = list(prefix)
        last_off = None
        if pos < len(tokens) and tokens[pos][0] == "::":
            segs.append("::")  # a leading `::`: an external crate
            pos += 1
        while pos < len(tokens):
            tok, off = tokens[pos]
            if tok == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos][0] != "}":
                    if tokens[pos][0] == ",":
                        pos += 1
                        continue
                    before = pos
                    tree(segs)
                    if pos == before:
                        pos += 1
                pos += 1
                return
            if tok == "*":
                leaves.append((segs, off, None))
                pos += 1
                return
            if IDENT.match(tok.replace("r#", "")) and tok != "as":
                segs.append(tok.replace("r#", ""))
                last_off = off
                pos += 1
                if pos < len(tokens) and tokens[pos][0] == "::":
                    pos += 1
                    continue
                alias = None
                if pos + 1 < len(tokens) and tokens[pos][0] == "as":
                    alias = tokens[pos + 1][0]
                    pos += 2
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                    if alias is None and segs:
                        alias = segs[-1]
                elif alias is None:
                    alias = segs[-1]
                leaves.append((segs, last_off, alias))
                return
            return  # `,`, `}`, `;`: the caller's

    tree([])
    return end, leaves


class Crate:
    def __init__(self, name, directory, root):
        self.name = name
        self.dir = directory  # relative to the workspace
        self.root = root
        self.files = {}  # relative path -> SourceFile
        self.modules = {}  # file -> set of (target, module path)
        self.skipped_test = set()
        self.edges = collections.defaultdict(list)  # (a, b) -> refs

    def rel(self, path):
        return os.path.relpath(path, self.root)


def read_toml(path):
    with open(path, "rb") as f:
        data = f.read()
    if tomllib:
        return tomllib.loads(data.decode("utf-8"))
    text = data.decode("utf-8")
    out = {}
    name = re.search(r'^\s*name\s*=\s*"([^"]+)"', text, re.M)
    out["package"] = {"name": name.group(1)} if name else {}
    members = re.search(r"^\s*members\s*=\s*\[(.*?)\]", text, re.M | re.S)
    exclude = re.search(r"^\s*exclude\s*=\s*\[(.*?)\]", text, re.M | re.S)
    out["workspace"] = {
        "members": re.findall(r'"([^"]+)"', members.group(1)) if members else [],
        "exclude": re.findall(r'"([^"]+)"', exclude.group(1)) if exclude else [],
    }
    lib = re.search(r'^\[lib\][^\[]*?^\s*path\s*=\s*"([^"]+)"', text, re.M | re.S)
    if lib:
        out["lib"] = {"path": lib.group(1)}
    out["bin"] = [
        {"path": p}
        for p in re.findall(r'^\[\[bin\]\][^\[]*?^\s*path\s*=\s*"([^"]+)"', text, re.M | re.S)
    ]
    return out


def crate_targets(crate_dir, manifest):
    """The root files of the crate's library and binaries."""
    roots = []
    lib = manifest.get("lib", {}).get("path", "src/lib.rs")
    if os.path.isfile(os.path.join(crate_dir, lib)):
        roots.append(os.path.normpath(os.path.join(crate_dir, lib)))
    bins = [b["path"] for b in manifest.get("bin", []) if "path" in b]
    bins.append("src/main.rs")
    bins += sorted(os.path.relpath(p, crate_dir) for p in glob.glob(os.path.join(crate_dir, "src/bin/*.rs")))
    bins += sorted(os.path.relpath(p, crate_dir) for p in glob.glob(os.path.join(crate_dir, "src/bin/*/main.rs")))
    for b in bins:
        p = os.path.normpath(os.path.join(crate_dir, b))
        if os.path.isfile(p) and p not in roots:
            roots.append(p)
    return roots


def is_test_name(path, src_dir):
    parts = os.path.relpath(path, src_dir).split(os.sep)
    return parts[-1] == "tests.rs" or "tests" in parts[:-1]


def analyse_crate(crate, bare):
    root_dir = os.path.join(crate.root, crate.dir)
    src_dir = os.path.join(root_dir, "src")
    manifest = read_toml(os.path.join(root_dir, "Cargo.toml"))
    cache = {}

    def load(path):
        if path not in cache:
            cache[path] = SourceFile(path)
        return cache[path]

    targets = []  # (root file, {module path: file}, {inline module paths}, [(file, module path)])
    for root in crate_targets(root_dir, manifest):
        file_mods, inline_mods, members = {}, set(), []
        stack = [(root, (), True, False)]
        seen = set()
        while stack:
            path, modpath, mod_rs, test = stack.pop()
            if path in seen or not os.path.isfile(path):
                continue
            seen.add(path)
            test = test or is_test_name(path, src_dir)
            sf = load(path)
            if test:
                # Left out, but walked: the modules it declares are tests too.
                crate.skipped_test.add(crate.rel(path))
            else:
                file_mods[modpath] = path
                members.append((path, modpath))
            for a, b, name in sf.inline:
                if not inside(sf.tests, a):
                    inline_mods.add(modpath + sf.inline_names(a) + (name,))
            here = os.path.dirname(path)
            for name, path_attr, inline, decl_test in sf.decls:
                child_mod = modpath + inline + (name,)
                if path_attr:
                    candidates = [os.path.join(here, *inline, path_attr)]
                else:
                    base = here if mod_rs else os.path.join(here, os.path.splitext(os.path.basename(path))[0])
                    base = os.path.join(base, *inline)
                    candidates = [os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")]
                for c in candidates:
                    c = os.path.normpath(c)
                    if os.path.isfile(c):
                        child_mod_rs = bool(path_attr) or os.path.basename(c) == "mod.rs"
                        stack.append((c, child_mod, child_mod_rs, decl_test or test))
                        break
        targets.append((root, file_mods, inline_mods, members))

    for root, file_mods, inline_mods, members in targets:
        known = set(file_mods) | inline_mods
        for path, modpath in members:
            rel = crate.rel(path)
            crate.files[rel] = load(path)
            crate.modules.setdefault(rel, set()).add((crate.rel(root), "::".join(modpath) or "crate"))
            for target_path, *ref in references(load(path), modpath, file_mods, known, bare):
                if target_path != path:
                    crate.edges[(rel, crate.rel(target_path))].append(tuple(ref))

    reached = set(crate.files) | crate.skipped_test
    crate.skipped_orphan = sorted(
        crate.rel(p)
        for p in glob.glob(os.path.join(src_dir, "**", "*.rs"), recursive=True)
        if crate.rel(p) not in reached
    )
    crate.skipped_test = sorted(crate.skipped_test - set(crate.files))


def references(sf, modpath, file_mods, known, bare):
    """(file, line, kind, via, text) for each reference of `sf` into the
    crate: kind "use" (line and text: the whole `use` declaration's) or
    "path" (the line's), via its first segment (crate, self, super) or
    "bare"."""
    code = sf.live
    out = []

    def absolute(segs, here):
        """Module path of `segs` written in module `here`, or None."""
        if not segs or segs[0] == "::":
            return None
        first = segs[0]
        if first == "crate":
            base, rest = (), segs[1:]
        elif first in ("self", "super"):
            base, rest = here, segs
        elif bare and here + (first,) in known:
            base, rest = here, segs
        elif bare and first in aliases:
            base, rest = aliases[first], segs[1:]
        else:
            return None
        path = list(base)
        for s in rest:
            if s == "self":
                continue
            if s == "super":
                if not path:
                    return None
                path.pop()
                continue
            path.append(s)
        return tuple(path)

    def via(segs):
        return segs[0] if segs[0] in ("crate", "self", "super") else "bare"

    def target(path):
        for k in range(len(path), -1, -1):
            if path[:k] in file_mods:
                return file_mods[path[:k]]
        return None

    # Use declarations first (their ranges are not read again as paths).
    uses = []  # (start, end, leaves, here)
    for m in USE.finditer(code):
        end, leaves = use_leaves(code, m.start())
        uses.append((m.start(), end, leaves, modpath + sf.inline_names(m.start())))
    aliases = {}
    if bare:
        for _ in range(2):  # aliases of aliases
            for start, end, leaves, here in uses:
                for segs, off, alias in leaves:
                    full = absolute(segs, here)
                    if full is not None and full in known and alias and alias != "_":
                        aliases[alias] = full
    for start, end, leaves, here in uses:
        for segs, off, alias in leaves:
            full = absolute(segs, here)
            if full is not None:
                t = target(full)
                if t:
                    out.append((t, sf.line_of(start), "use", via(segs), sf.statement(start, end)))
    use_ranges = merge([(a, b) for a, b, _, _ in uses])
    for m in PATH.finditer(code):
        if inside(use_ranges, m.start()):
            continue
        before = code[max(0, m.start() - 40) : m.start()].rstrip()
        if before.endswith("::"):
            continue  # the middle of a longer path
        if re.search(r"pub\s*\(\s*in$", before):
            continue  # pub(in crate::x) is a visibility
        segs = [m.group(1).replace("r#", "")] + PATH_SEGMENT.findall(m.group(2))
        full = absolute(segs, modpath + sf.inline_names(m.start()))
        if full is not None:
            t = target(full)
            if t:
                line = sf.line_of(m.start())
                out.append((t, line, "path", via(segs), sf.line_text(line)))
    return out


# ----------------------------------------------------------- the graph --


def tarjan(nodes, succ):
    """Strongly connected components, iteratively."""
    index, low, on_stack = {}, {}, set()
    stack, sccs = [], []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(succ.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ.get(child, ()))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    scc.append(w)
                    if w == node:
                        break
                sccs.append(sorted(scc))
    return sccs


def shortest_cycle(scc, succ):
    """One shortest cycle inside `scc` (ties: the first file in order)."""
    members = set(scc)
    best = None
    for start in scc:
        prev = {start: None}
        queue = collections.deque([start])
        found = None
        while queue and found is None:
            node = queue.popleft()
            for child in sorted(succ.get(node, ())):
                if child not in members:
                    continue
                if child == start:
                    found = node
                    break
                if child not in prev:
                    prev[child] = node
                    queue.append(child)
        if found is None:
            continue
        path = [found]
        while prev[path[-1]] is not None:
            path.append(prev[path[-1]])
        cycle = list(reversed(path)) + [start]
        if best is None or len(cycle) < len(best):
            best = cycle
    return best


# -------------------------------------------------------------- driver --


def workspace_crates(root):
    manifest = read_toml(os.path.join(root, "Cargo.toml"))
    ws = manifest.get("workspace", {})
    exclude = {os.path.normpath(e) for e in ws.get("exclude", [])}
    dirs = []
    for member in ws.get("members", []):
        for d in sorted(glob.glob(os.path.join(root, member))):
            rel = os.path.normpath(os.path.relpath(d, root))
            if rel in exclude or rel in dirs:
                continue
            if os.path.isfile(os.path.join(d, "Cargo.toml")) and os.path.isdir(os.path.join(d, "src")):
                dirs.append(rel)
    crates = []
    for d in dirs:
        name = read_toml(os.path.join(root, d, "Cargo.toml")).get("package", {}).get("name", d)
        crates.append(Crate(name, d, root))
    return crates


def main():
    parser = argparse.ArgumentParser(
        description="Import circles between the source files of each workspace crate."
    )
    parser.add_argument("--max", type=int, default=3, metavar="N",
                        help="exit with status 1 if a circle has more than N files (default 3)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--edges", action="store_true",
                        help="list each arrow inside each circle with the file:line making it")
    parser.add_argument("--bare-paths", action="store_true",
                        help="also count paths through a child module or a module a `use` brought in")
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                        help="the workspace (default: the script's parent folder)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)

    report = []
    for crate in workspace_crates(root):
        analyse_crate(crate, args.bare_paths)
        succ = collections.defaultdict(set)
        for a, b in crate.edges:
            succ[a].add(b)
        circles = []
        for scc in tarjan(sorted(crate.files), succ):
            if len(scc) < 2:
                continue
            members = set(scc)
            edges = []
            for (a, b), refs in sorted(crate.edges.items()):
                if a in members and b in members:
                    edges.append({
                        "from": a,
                        "to": b,
                        "refs": [
                            {"line": line, "kind": kind, "via": via, "text": text}
                            for line, kind, via, text in sorted(set(refs))
                        ],
                    })
            circles.append({
                "size": len(scc),
                "files": scc,
                "shortest_cycle": shortest_cycle(scc, succ) if len(scc) > 3 else None,
                "edges": edges,
            })
        circles.sort(key=lambda c: (-c["size"], c["files"]))
        report.append({
            "crate": crate.name,
            "dir": crate.dir,
            "files": len(crate.files),
            "edges": len(crate.edges),
            "circles": circles,
            "modules": {f: sorted({m for _, m in ms}) for f, ms in sorted(crate.modules.items())},
            "skipped_test_files": crate.skipped_test,
            "skipped_undeclared_files": crate.skipped_orphan,
        })

    all_circles = [c for r in report for c in r["circles"]]
    over = [c for c in all_circles if c["size"] > args.max]
    summary = {
        "crates": len(report),
        "circles": len(all_circles),
        "circles_over_3": sum(1 for c in all_circles if c["size"] > 3),
        "max": args.max,
        "circles_over_max": len(over),
        "largest": max((c["size"] for c in all_circles), default=0),
        "bare_paths": args.bare_paths,
    }

    if args.json:
        json.dump({"summary": summary, "crates": report}, sys.stdout, indent=2)
        print()
    else:
        for r in report:
            if not r["circles"]:
                continue
            src = os.path.join(r["dir"], "src")
            short = lambda f: os.path.relpath(f, src)  # noqa: E731
            print(f"{r['crate']} ({src}/): {r['files']} files, {r['edges']} arrows, "
                  f"{len(r['circles'])} circle{'s' if len(r['circles']) != 1 else ''}")
            for c in r["circles"]:
                print(f"  circle of {c['size']} files: " + ", ".join(short(f) for f in c["files"]))
                if c["shortest_cycle"]:
                    print("    shortest cycle: " + " -> ".join(short(f) for f in c["shortest_cycle"]))
                if args.edges:
                    for e in c["edges"]:
                        print(f"    {short(e['from'])} -> {short(e['to'])}")
                        for ref in e["refs"]:
                            print(f"      {e['from']}:{ref['line']}: {ref['text']}")
            print()
        quiet = [r["crate"] for r in report if not r["circles"]]
        if quiet:
            print(f"no circle: {', '.join(quiet)}")
        print(f"summary: {summary['circles']} circles in {summary['crates']} crates; "
              f"{summary['circles_over_3']} of more than 3 files; largest {summary['largest']} files"
              + (f"; {summary['circles_over_max']} over --max {args.max}" if args.max != 3 else ""))
    return 1 if over else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # The reader went away (`| head`): it read what it wanted.
        sys.stderr.close()
