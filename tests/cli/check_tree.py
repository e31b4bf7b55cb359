#!/usr/bin/env python3
"""The rules of the tree that a reviewer would otherwise check by hand (shared/DESIGN.md):

 - no source file outside tests/ over 500 lines, and no bench/ file over 300 (a program keeps its
   options, its cases and what it writes; what benches share lives in harness/);
 - bench/ holds programs only: no add_library under bench/, and no file outside bench/
   includes a bench/ header;
 - one owner per idea: AdamW's state is runtime/adamw's (no other file outside kernels/ and
   tests/ calls adam_step), a model's size is models/model_shape.h's ModelShape (no other
   file defines it), a rank layout is models/layout.h's ParallelLayout, and CLI11 is
   included only by the three files that build or parse a command line (parsing its header
   dominates the compile time of a file that includes it);
 - the floors, bottom up (docs/architecture.md): kernels/ -> runtime/ -> comm/ -> moe/, models/
   -> pipeline/ -> gpt/ -> harness/ -> bench/, tools/; a file includes no header of a floor above
   its own (the communicators live in comm/, above the streams that issue their operations; the
   GPT model in gpt/, above the pipeline engine it runs on);
 - every code folder (and experiments/) has a README.md, which names only files that exist (beside
   it, or from the project's root);
 - README.md is an entry point of at most 150 lines;
 - every relative link in README.md and docs/ points at a file or folder that exists;
 - one table per family: the names of the dispatchers, schedules, expert-GEMM routes, layouts and
   collectives are typed in their family's table only (FAMILIES below), so no code outside it and
   tests/ holds a list of two or more of a family's names or compares a string with one of them.

  check_tree.py SOURCE_DIR             exit 0 when every rule holds, 1 with one line per breach
  check_tree.py --planted SOURCE_DIR   the names rule on planted lines (a bench's list and compare,
                                       a plot's list): exit 0 when it finds each, 1 when it misses one
"""
import pathlib
import re
import subprocess

import checklib

MAX_LINES = 500
BENCH_MAX_LINES = 300
README_MAX_LINES = 150
FLOORS = {"kernels": 0, "runtime": 1, "comm": 2, "moe": 3, "models": 3, "pipeline": 4, "gpt": 5, "harness": 6, "bench": 7,
          "tools": 7}
INCLUDE = re.compile(r'\s*#\s*include\s+"([a-z_]+)/')
SOURCE = re.compile(r"\.(cpp|h|hpp|cu|cuh|py|sh)$")
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


# Each family's table and the pattern that reads its names from the table's rows.
FAMILIES = [
    ("dispatcher", "moe/dispatcher_table.cpp", r'\{"([\w-]+)", ExpertsOver::'),
    ("schedule", "models/pipeline_schedule.cpp", r'\{PipelineScheduleKind::\w+, "([\w-]+)"'),
    ("expert-GEMM route", "kernels/expert_gemm_routes.cpp", r'\{ExpertGemm::\w+, "([\w-]+)"\}'),
    ("layout", "models/layout.cpp", r'\{LayoutKind::\w+, "([\w-]+)", "([\w-]+)"'),
    ("collective", "comm/collective_table.cpp", r'\{Collective::\w+, "([\w-]+)"'),
]
CODE = re.compile(r"\.(cpp|h|hpp|cu|cuh|py)$")
BRACED = re.compile(r"\{[^{}]*\}")
BRACKETED_PY = re.compile(r"[\[({][^\[\](){}]*[\])}]")  # a Python list, tuple, set or dict
LITERAL = re.compile(r'"([\w-]+)"')
LITERAL_PY = re.compile(r'"([\w-]+)"|\'([\w-]+)\'')


def family_names(root):
    """(family, table file, its names) for each family whose table exists."""
    out = []
    for family, table, pattern in FAMILIES:
        path = root / table
        if not path.is_file():
            out.append((family, table, None))
            continue
        names = {n for m in re.finditer(pattern, path.read_text()) for n in m.groups()}
        out.append((family, table, names))
    return out


def name_breaches(families, path, text):
    """A list of two or more of one family's names, or a compare with one, in `text` (of `path`)."""
    breaches = []
    line_of = lambda pos: text.count("\n", 0, pos) + 1
    python = path.endswith(".py")
    quote = "[\"']" if python else '"'
    for family, table, names in families:
        if not names or path == table or path == table[:-len(".cpp")] + ".h":
            continue
        for m in (BRACKETED_PY if python else BRACED).finditer(text):
            if not python and ";" in m.group(0):  # a block of statements, not a list
                continue
            found = [a or b for a, b in LITERAL_PY.findall(m.group(0))] if python else LITERAL.findall(m.group(0))
            typed = [n for n in found if n in names]
            if len(typed) >= 2:
                breaches.append(f"{path}:{line_of(m.start())}: lists {family} names ({', '.join(typed)}); "
                                f"take them from {table}")
        for name in names:
            compare = (r"(==|!=)\s*" + quote + re.escape(name) + quote + "|" + quote + re.escape(name) + quote +
                       r"\s*(==|!=)")
            for m in re.finditer(compare, text):
                breaches.append(f"{path}:{line_of(m.start())}: compares with the {family} name '{name}'; "
                                f"parse it through {table}")
    return breaches


def planted(root):
    """The names rule finds a bench that lists collectives and compares a dispatcher's name, and a
    plot that lists schedules."""
    families = family_names(root)
    text = ('add_choices(app, "--collectives", names_,\n  {"all_to_all", "all_reduce"}, "Which");\n'
            'if (dispatcher == "ppmoe") return;\n')
    found = name_breaches(families, "bench/planted.cpp", text)
    found += name_breaches(families, "plots/planted.py", "for s in ('gpipe', \"zb-h1\"):\n    pass\n")
    want = ("lists collective names", "compares with the dispatcher name 'ppmoe'", "plots/planted.py:1: lists schedule names")
    missed = [w for w in want if not any(w in f for f in found)]
    for w in missed:
        print(f"check_tree --planted: the names rule missed the planted bench's line ({w})")
    if not missed:
        print("check_tree --planted: the names rule finds the planted list and compare")
    return 1 if missed else 0


def tracked(root):
    """The tree's files as git sees them; without git, every file but build folders and hidden ones."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, check=True).stdout
        return [f for f in out.splitlines() if (root / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                and not any(part.startswith((".", "build")) for part in p.relative_to(root).parts)]


def main(root):
    root = pathlib.Path(root).resolve()
    files = tracked(root)
    breaches = []
    for f in files:
        if f.startswith("tests/") or not SOURCE.search(f):
            continue
        n = sum(1 for _ in open(root / f, errors="replace"))
        if n > MAX_LINES:
            breaches.append(f"{f}: {n} lines (at most {MAX_LINES} outside tests/; split it by job)")
        elif f.startswith("bench/") and n > BENCH_MAX_LINES:
            breaches.append(f"{f}: {n} lines (a bench file holds at most {BENCH_MAX_LINES}: what benches share goes to harness/)")
    for f in files:
        if f.startswith("bench/") and f.endswith("CMakeLists.txt"):
            if re.search(r"^\s*add_library\s*\(", (root / f).read_text(), re.M):
                breaches.append(f"{f}: declares a library (bench/ holds programs; library code belongs in the floors below)")
        elif not f.startswith("bench/") and SOURCE.search(f):
            for i, line in enumerate(open(root / f, errors="replace"), start=1):
                if re.match(r'\s*#\s*include\s+"bench/', line):
                    breaches.append(f"{f}:{i}: includes a bench/ header (bench/ holds programs only)")
    # One owner per idea: where each may be defined or called (outside tests/).
    owners = [(re.compile(r"\badam_step\s*\("), ("kernels/", "runtime/adamw.cpp"), "calls adam_step: AdamW's state belongs to runtime/adamw.h"),
              (re.compile(r"^\s*struct\s+ModelShape\b"), ("models/model_shape.h",), "defines ModelShape: a model's size has one type, models/model_shape.h's"),
              (re.compile(r"^\s*struct\s+ParallelLayout\b"), ("models/layout.h",), "defines ParallelLayout: a rank layout has one type, models/layout.h's"),
              (re.compile(r"^\s*#\s*include\s*<CLI/"), ("harness/options.cpp", "harness/bench.cpp", "harness/tool_command_line.cpp"),
               "includes CLI11: options are added through harness/options.h, tools parse through harness/tool_command_line.h")]
    for f in files:
        if f.startswith("tests/") or not SOURCE.search(f) or f.endswith(".py"):
            continue
        for i, line in enumerate(open(root / f, errors="replace"), start=1):
            for pattern, allowed, what in owners:
                if pattern.search(line) and not f.startswith(allowed):
                    breaches.append(f"{f}:{i}: {what}")
    for f in files:
        top = f.split("/")[0]
        if top not in FLOORS or not re.search(r"\.(h|hpp|cpp|cu|cuh)$", f):
            continue
        for i, line in enumerate(open(root / f, errors="replace"), start=1):
            m = INCLUDE.match(line)
            if m and FLOORS.get(m.group(1), -1) > FLOORS[top]:
                breaches.append(f"{f}:{i}: includes {m.group(1)}/, a floor above {top}/ (docs/architecture.md)")
    for folder, what in (("gpt", "the GPT model's floor"), ("comm", "the communicators' floor")):
        if not (root / folder).is_dir():
            breaches.append(f"{folder}/: missing ({what})")
    named = re.compile(r"`([\w./*-]+\.(?:h|hpp|cpp|cu|cuh|py|sh|md|csv|\*))`")
    for folder in list(FLOORS) + ["experiments"]:
        readme = root / folder / "README.md"
        if not readme.is_file():
            breaches.append(f"{folder}/README.md: missing (each code folder says what it holds, what it may include "
                            "and how to add the next one of its kind)")
            continue
        for i, line in enumerate(open(readme), start=1):
            for name in named.findall(line):
                if not (list((root / folder).glob(name)) or list(root.glob(name))):
                    breaches.append(f"{folder}/README.md:{i}: names {name}, which does not exist")
    families = family_names(root)
    for family, table, names in families:
        if not names:
            breaches.append(f"{table}: no {family} names read from it (the names rule's pattern no longer matches its rows)")
    for f in files:
        if f.startswith("tests/") or not CODE.search(f):
            continue
        breaches.extend(name_breaches(families, f, (root / f).read_text(errors="replace")))
    readme = root / "README.md"
    n = sum(1 for _ in open(readme))
    if n > README_MAX_LINES:
        breaches.append(f"README.md: {n} lines (an entry point of at most {README_MAX_LINES}; the rest belongs in docs/)")
    pages = [readme] + sorted((root / "docs").glob("**/*.md")) + sorted(root.glob("experiments/*/README.md"))
    for page in pages:
        for i, line in enumerate(open(page), start=1):
            for target, _ in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):  # http:, mailto: ...
                    continue
                if not (page.parent / target).exists():
                    breaches.append(f"{page.relative_to(root)}:{i}: link to {target}, which does not exist")
    return checklib.report("check_tree", breaches, f"{len(files)} files")


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--planted":
        sys.exit(planted(pathlib.Path(sys.argv[2]).resolve()))
    checklib.run(main, __doc__, 1)
