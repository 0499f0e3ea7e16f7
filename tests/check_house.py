#!/usr/bin/python3
"""check_house.py: the house rules of issue 26 that a compiler cannot see, as a ctest.

  usage: check_house.py [SOURCE_ROOT]   (default: the folder above this script)

(a) No include circles between modules. A module is a source file without its extension
    (models/net for models/net.c and models/net.h); module A depends on module B when A.c,
    A.cu, A.h or A.cuh includes B.h (or B.cuh) and B.c (or B.cu) exists. Any strongly
    connected set of two or more modules under app/, models/, pipeline/ fails, with the
    #include lines that close it, so the fix (move the shared type to a header of its
    own, or forward-declare it) is plain from the message.
(b) No source file (.c .h .cu .cuh) under app/, models/, pipeline/ or tests/ over 800 lines
    (counted as `wc -l` counts them: newlines). Split the file by concern (STYLE.md).

Exit status 0 when both hold, 1 with one line per offence otherwise. Standard library
only: it runs with /usr/bin/python3 and no numpy.
"""
import os
import re
import sys

MODULE_DIRS = ("app", "models", "pipeline")
LENGTH_DIRS = ("app", "models", "pipeline", "tests")
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
IMPL_EXT = (".c", ".cu")      # a module exists where one of these does
MAX_LINES = 800               # issue 26: "no source file over 800 lines"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def source_files(root, dirs):
    """Repository-relative paths of the source files under dirs, sorted."""
    out = []
    for d in dirs:
        for dp, dns, fns in os.walk(os.path.join(root, d)):
            dns.sort()
            for f in fns:
                if f.endswith(SOURCE_EXT):
                    out.append(os.path.relpath(os.path.join(dp, f), root))
    return sorted(out)


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


def resolve(root, rel, inc):
    """The repository-relative path of `#include "inc"` in file rel: from the root (the
    project's convention, -I at the top) or, failing that, from rel's own folder."""
    for cand in (inc, os.path.join(os.path.dirname(rel), inc)):
        if os.path.isfile(os.path.join(root, cand)):
            return os.path.normpath(cand)
    return None


def module_graph(root):
    """{A: {B: [(file, line, text), ...]}}: the include edges between modules."""
    files = source_files(root, MODULE_DIRS)
    modules = {os.path.splitext(p)[0] for p in files if p.endswith(IMPL_EXT)}
    graph = {}
    for rel in files:
        a = os.path.splitext(rel)[0]
        text = read(root, rel)
        for m in INCLUDE_RE.finditer(text):
            target = resolve(root, rel, m.group(1))
            if target is None:
                continue  # a system-style or generated header: not a module edge
            b = os.path.splitext(target)[0]
            if b != a and b in modules:
                line = text.count("\n", 0, m.start()) + 1
                graph.setdefault(a, {}).setdefault(b, []).append(
                    (rel, line, m.group(0).strip()))
    return graph


def circles(graph):
    """Strongly connected sets of >= 2 modules (Tarjan's algorithm, iterative so that a
    deep chain of includes cannot hit Python's recursion limit)."""
    index, low, on, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def check_circles(root):
    graph = module_graph(root)
    errors = []
    for comp in circles(graph):
        errors.append("include circle: %s (rule: a module's .c/.h may include another "
                      "module's header only one way; move the shared type to a header of "
                      "its own or forward-declare it)" % " <-> ".join(comp))
        members = set(comp)
        for a in comp:
            for b in sorted(graph.get(a, {})):
                if b in members:
                    for rel, line, text in graph[a][b]:
                        errors.append("  %s:%d: %s   (%s -> %s)" % (rel, line, text, a, b))
    return errors


def check_lengths(root):
    errors = []
    for rel in source_files(root, LENGTH_DIRS):
        with open(os.path.join(root, rel), "rb") as f:
            n = f.read().count(b"\n")
        if n > MAX_LINES:
            errors.append("%s: %d lines, over the %d-line limit (issue 26): split it by "
                          "concern" % (rel, n, MAX_LINES))
    return errors


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    missing = [d for d in MODULE_DIRS if not os.path.isdir(os.path.join(root, d))]
    if missing:
        # A wrong root would otherwise pass with nothing checked.
        print("check_house: %s has no %s: pass the source root (CMAKE_SOURCE_DIR)"
              % (root, ", ".join(missing)))
        return 2
    errors = check_circles(root) + check_lengths(root)
    for e in errors:
        print(e)
    nfiles = len(source_files(root, LENGTH_DIRS))
    print("check_house: %d files checked, %s" % (nfiles, "%d problem line(s)" % len(errors)
                                                  if errors else "no circle, none over %d lines"
                                                  % MAX_LINES))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
