#!/usr/bin/python3
"""check_house.py: the house rules of issue 26 and 42 that a compiler cannot see, as a ctest
(docs/design.md §10).

  usage: check_house.py [SOURCE_ROOT]   (default: the folder above this script)

(a) No include circles between modules. A module is a source file without its extension
    (models/net for models/net.c and models/net.h); module A depends on module B when A.c,
    A.cu, A.h or A.cuh includes B.h (or B.cuh) and B.c (or B.cu) exists. Any strongly
    connected set of two or more modules under base/, app/, models/, pipeline/ fails, with the
    #include lines that close it, so the fix (move the shared type to a header of its
    own, or forward-declare it) is plain from the message.
(b) No source file (.c .h .cu .cuh) under base/, app/, models/, pipeline/
    or tests/ over 800 lines
    (counted as `wc -l` counts them: newlines). Split the file by concern (docs/design.md §2).
(c) Every document a source file, script, CMakeLists.txt or doc cites is in the repository:
    docs/NAME.md must exist, and so must an upper-case NAME.md at the top (README.md); a
    section cited as "docs/design.md §N" or "docs/style.md §N.M" (also in lists: "§3.1,
    §3.2", and as "design.md §N" inside docs/) must be a numbered heading ("## N. Title",
    "### N.M Title") of that file; a bare "§N" inside docs/design.md or docs/style.md
    cites that file's own sections.
(d) Every relative markdown link in README.md and docs/**.md (docs/notebook/ too) leads
    to a file that exists, and its #anchor, when the target is markdown, to a heading of that file (GitHub's
    anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2 for repeats).

(e) A unit's insides stay inside it: a private header (NAME_impl.h, NAME_impl.cuh) is
    included only by files of its own folder, and a unit folder (UNIT_FACES below) is
    seen from outside through its one public header (docs/design.md §2).

(f) No circle of calls between the files of one folder: file A calls file B when A.c (or
    .cu) calls a function B.c defines (not static); for the Python oracles of tests/oracle/
    and bench/, when A.py imports B.py. A circle fails unless docs/design.md §2 argues for
    it: a list line that names each of its files in backticks and a "↔" (the check reads
    those lines; every such line must still be a circle).

Exit status 0 when all hold, 1 with one line per offence (file:line and a hint) otherwise.
Standard library only: it runs with /usr/bin/python3 and no numpy.
"""
import os
import subprocess
import re
import sys

MODULE_DIRS = ("base", "app", "models", "pipeline")
LENGTH_DIRS = ("base", "app", "models", "pipeline", "tests")
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
IMPL_EXT = (".c", ".cu")      # a module exists where one of these does
MAX_LINES = 800               # issue 26: "no source file over 800 lines"
# The split units that are folders, each with its one public header (issue 42 item 3).
UNIT_FACES = {
    "pipeline/parallel/towers": "tower.h",
    "pipeline/data/video": "video.h",
    "pipeline/data/dataset": "dataset.h",
    "pipeline/data/synth": "synth.h",
}
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


# ---- (f): call circles between the files of one folder ----

CALL_DEF_RE = re.compile(r"^(?!static\b)(?!typedef\b)(?!extern\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)"
                         r"\s*\([^;{}]*?\)\s*\{", re.M)
CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
PY_IMPORT_RE = re.compile(r"^\s*(?:from\s+(\w+)\s+import|import\s+(\w+))", re.M)
PY_DIRS = ("tests/oracle", "bench")


def code_only(text):
    """C text without comments and string literals (newlines kept), so that a function
    named in a comment or a message is no call."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def call_graphs(root):
    """{folder: {file: {file it calls}}} for the C folders and the Python oracle folders."""
    folders = {}
    for rel in source_files(root, MODULE_DIRS):
        if rel.endswith(IMPL_EXT):
            folders.setdefault(os.path.dirname(rel), []).append(rel)
    graphs = {}
    for folder, files in sorted(folders.items()):
        text = {f: code_only(read(root, f)) for f in files}
        defs = {}
        for f in files:
            for m in CALL_DEF_RE.finditer(text[f]):
                defs.setdefault(m.group(1), f)
        graphs[folder] = {f: {defs[m.group(1)] for m in CALL_RE.finditer(text[f])
                              if m.group(1) in defs and defs[m.group(1)] != f} for f in files}
    for d in PY_DIRS:
        full = os.path.join(root, d)
        if not os.path.isdir(full):
            continue
        files = sorted(os.path.join(d, f) for f in os.listdir(full) if f.endswith(".py"))
        names = {os.path.splitext(os.path.basename(f))[0]: f for f in files}
        g = {}
        for f in files:
            g[f] = set()
            for m in PY_IMPORT_RE.finditer(read(root, f)):
                n = m.group(1) or m.group(2)
                if n in names and names[n] != f:
                    g[f].add(names[n])
        graphs[d] = g
    return graphs


def argued_circles(root):
    """The call circles docs/design.md argues for: {frozenset(files): line number}."""
    out = {}
    path = os.path.join(root, "docs", "design.md")
    if not os.path.isfile(path):
        return out
    for i, line in enumerate(read(root, "docs/design.md").split("\n"), 1):
        if line.lstrip().startswith("- ") and "↔" in line:
            files = frozenset(re.findall(r"`([\w./-]+\.(?:c|cu|py))`", line))
            if len(files) >= 2:
                out[files] = i
    return out


def check_call_circles(root):
    errors = []
    argued = argued_circles(root)
    found = set()
    for folder, g in call_graphs(root).items():
        for comp in circles(g):
            key = frozenset(comp)
            found.add(key)
            if key in argued:
                continue
            errors.append("call circle in %s/: %s (rule: the files of a folder call one way; "
                          "move the function that closes it to the file that calls it, pass "
                          "what it computes in, or argue for the circle in docs/design.md §2 "
                          "with a line naming each file in backticks and a \"↔\")"
                          % (folder, " <-> ".join(os.path.basename(c) for c in comp)))
            for a in comp:
                for b in sorted(g[a]):
                    if b in key:
                        errors.append("  %s calls %s" % (a, b))
    for key, line in sorted(argued.items(), key=lambda kv: kv[1]):
        if key not in found:
            errors.append("docs/design.md:%d: argues for a call circle (%s) that is not there "
                          "(any more): drop the line" % (line, ", ".join(sorted(key))))
    return errors


def check_faces(root):
    """(e): private headers from their own folder only; unit folders through their face."""
    errors = []
    for rel in source_files(root, MODULE_DIRS + ("tests",)):
        text = read(root, rel)
        here = os.path.dirname(rel)
        for m in INCLUDE_RE.finditer(text):
            target = resolve(root, rel, m.group(1))
            if target is None:
                continue
            there, name = os.path.split(target)
            line = text.count("\n", 0, m.start()) + 1
            if there == here:
                continue
            if os.path.splitext(name)[0].endswith("_impl"):
                errors.append("%s:%d: %s: a private header of %s/ (rule: *_impl.h is included "
                              "only inside its own folder; include the unit's public header, "
                              "or move the file into the unit)" % (rel, line, m.group(0).strip(),
                                                                   there))
            elif there in UNIT_FACES and name != UNIT_FACES[there]:
                errors.append("%s:%d: %s: %s/ is seen from outside through %s only (rule: one "
                              "public header per unit folder; move what you need there)"
                              % (rel, line, m.group(0).strip(), there, UNIT_FACES[there]))
    return errors


# ---- (c) and (d): documents and the references to them ----

REF_EXT = (".c", ".h", ".cu", ".cuh", ".py", ".sh", ".js", ".md", ".txt", ".cmake")
SECTIONED = ("docs/design.md", "docs/style.md")
SEC_LIST = r"§\d+(?:\.\d+)*(?:(?:[ \t]*,[ \t]*|[ \t]+and[ \t]+|[ \t]*;[ \t]*)§\d+(?:\.\d+)*)*"
# a citation may wrap onto the next comment line: "(docs/design.md\n * §3.1)"
WRAP = r"(?:[ \t]*\n[ \t]*(?:\*|#|//)?)?[ \t]*"
SEC_RE = re.compile(r"(?<![\w.-])((?:docs/)?(?:design|style)\.md)" + WRAP + "(" + SEC_LIST + ")")
SEC_NUM_RE = re.compile(r"§(\d+(?:\.\d+)*)")
DOCS_PATH_RE = re.compile(r"(?<![\w.-])((?:\.\./)*docs/[\w.-]+\.md)\b")
TOP_DOC_RE = re.compile(r"(?<![\w./-])([A-Z][A-Z0-9_-]*\.md)\b")
LINK_RE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE_RE = re.compile(r"^\s*(```|~~~)")


def ref_files(root):
    """Repository-relative paths of the files whose references are checked: sources,
    scripts, CMake files and docs, outside build folders and hidden folders."""
    # In a git checkout: the files git tracks or would (not what .gitignore keeps out,
    # such as tools/onnxrt/node_modules that setup.sh installs).
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True).stdout
        names = sorted(set(os.path.normpath(n) for n in listed.decode().split("\0") if n))
        return [n for n in names if (n.endswith(REF_EXT) or os.path.basename(n) == "CMakeLists.txt")
                and os.path.isfile(os.path.join(root, n))]
    except (OSError, subprocess.CalledProcessError):
        pass
    out = []
    for dp, dns, fns in os.walk(root):
        rel_dp = os.path.relpath(dp, root)
        dns[:] = sorted(d for d in dns if not d.startswith((".", "build"))
                        and not (rel_dp == "tests" and d == "data"))
        for f in sorted(fns):
            if f.endswith(REF_EXT) or f == "CMakeLists.txt":
                out.append(os.path.normpath(os.path.relpath(os.path.join(dp, f), root)))
    return out


def md_lines(text):
    """(line number, line) of a markdown text outside fenced code blocks."""
    fenced = False
    for i, line in enumerate(text.split("\n"), 1):
        if FENCE_RE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield i, line


def slug(title):
    """GitHub's anchor of a heading: the rendered text (code marks and link targets
    dropped), lower case, anything but letters, digits, '_', '-' and spaces removed,
    spaces to hyphens."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)
    t = t.replace("`", "").lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def headings(root, rel, cache={}):
    """(section numbers, anchors) of the markdown file rel: "3.1" for "### 3.1 Title" or
    "## 3. Title", and every heading's GitHub anchor."""
    if rel not in cache:
        nums, anchors, seen = set(), set(), {}
        for _, line in md_lines(read(root, rel)):
            m = HEADING_RE.match(line)
            if not m:
                continue
            title = m.group(2)
            n = re.match(r"(\d+(?:\.\d+)*)\.?\s", title + " ")
            if n:
                nums.add(n.group(1))
            a = slug(title)
            k = seen.get(a, 0)
            seen[a] = k + 1
            anchors.add(a if k == 0 else "%s-%d" % (a, k))
        cache[rel] = (nums, anchors)
    return cache[rel]


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def check_doc_refs(root):
    errors = []
    for rel in ref_files(root):
        if rel == os.path.join("tests", "check_house.py"):
            continue  # its own docstring names the patterns it looks for
        text = read(root, rel)
        is_doc = rel.endswith(".md")
        # docs/NAME.md must exist; an upper-case NAME.md must exist at the top
        for m in DOCS_PATH_RE.finditer(text):
            target = m.group(1)
            base = root if not target.startswith("..") else os.path.dirname(
                os.path.join(root, rel))
            if not os.path.isfile(os.path.normpath(os.path.join(base, target))):
                errors.append("%s:%d: cites %s, which is not in the repository (hint: the "
                              "docs are docs/*.md; the design is docs/design.md, the style "
                              "docs/style.md)" % (rel, line_of(text, m.start()), target))
        for m in TOP_DOC_RE.finditer(text):
            name = m.group(1)
            here = os.path.join(os.path.dirname(os.path.join(root, rel)), name)
            if not (os.path.isfile(os.path.join(root, name)) or os.path.isfile(here)):
                errors.append("%s:%d: cites %s, which is not in the repository (hint: the "
                              "design is docs/design.md, how the code reads docs/style.md)"
                              % (rel, line_of(text, m.start()), name))
        # sections: "docs/design.md §3.1", "design.md §3.1, §3.2" in docs
        for m in SEC_RE.finditer(text):
            doc = m.group(1)
            if not doc.startswith("docs/"):
                if not (is_doc and os.path.dirname(rel) == "docs"):
                    continue  # "design.md" outside docs/ names no file of ours
                doc = "docs/" + doc
            if not os.path.isfile(os.path.join(root, doc)):
                continue  # reported above as a missing document
            nums, _ = headings(root, doc)
            for n in SEC_NUM_RE.findall(m.group(2)):
                if n not in nums:
                    errors.append("%s:%d: cites %s §%s, which has no such section (hint: "
                                  "its numbered headings are %s)"
                                  % (rel, line_of(text, m.start()), doc, n,
                                     ", ".join(sorted(nums, key=lambda v: [int(x) for x in
                                                                           v.split(".")]))))
        # a bare "§N" inside a sectioned doc cites that doc
        if rel in SECTIONED:
            nums, _ = headings(root, rel)
            for i, line in md_lines(text):
                line = SEC_RE.sub("", line)
                for n in SEC_NUM_RE.findall(line):
                    if n not in nums:
                        errors.append("%s:%d: §%s: no such section in this file" % (rel, i, n))
    return errors


def check_md_links(root):
    errors = []
    docs = [f for f in ref_files(root) if f.endswith(".md") and
            (f == "README.md" or f.startswith("docs/"))]
    for rel in docs:
        text = read(root, rel)
        for i, line in md_lines(text):
            for m in LINK_RE.finditer(re.sub(r"`[^`]*`", "", line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto: ...
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
                if dest.startswith(".."):
                    errors.append("%s:%d: link %s leaves the repository" % (rel, i, target))
                    continue
                full = os.path.join(root, dest)
                if not os.path.exists(full):
                    errors.append("%s:%d: link %s: %s does not exist (hint: links are relative "
                                  "to the page's own folder)" % (rel, i, target, dest))
                    continue
                if anchor and dest.endswith(".md") and os.path.isfile(full):
                    if anchor not in headings(root, dest)[1]:
                        errors.append("%s:%d: link %s: no heading of %s makes the anchor #%s "
                                      "(hint: GitHub's anchor is the heading in lower case, "
                                      "punctuation dropped, spaces as hyphens)"
                                      % (rel, i, target, dest, anchor))
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
    errors = (check_circles(root) + check_lengths(root) + check_doc_refs(root) +
              check_md_links(root) + check_faces(root) + check_call_circles(root))
    for e in errors:
        print(e)
    nfiles = len(source_files(root, LENGTH_DIRS))
    print("check_house: %d source files, %d files' references checked, %s"
          % (nfiles, len(ref_files(root)), "%d problem line(s)" % len(errors) if errors else
             "no circle, none over %d lines, every cited doc, section and link there, "
             "every unit seen through its face, no call circle but those argued"
             % MAX_LINES))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
