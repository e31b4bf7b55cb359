#!/usr/bin/env python3
"""The papers are typed once, in experiments/reference/papers.csv:

 - README.md's table of papers is the one its rows give, row by row, in order;
 - each row's anchor is GitHub's slug of its report section, "name (key)", and its page exists;
 - every paper of claims.csv and values.csv has a row, and every row has claims;
 - no code, plot or script types the list: a paper's title, or a key as a quoted string (the
   report and the plots read the file; a figure's caption citing "MPMoE (003) Fig. 2" is no list);
 - docs/adding_a_paper.md names the files a new paper touches, and each of them exists.

  check_papers.py SOURCE_DIR     exit 0 when all hold, 1 with one line per breach
"""
import csv
import pathlib
import re
import sys


def slug(heading):
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def main(src):
    src = pathlib.Path(src)
    ref = src / "experiments" / "reference"
    problems = []
    papers = list(csv.DictReader((ref / "papers.csv").open(newline="")))
    keys = [p["key"] for p in papers]
    want = [f"| {p['key']} | {p['name']}: \"{p['title']}\" | {p['covers']} | [{p['page']}]({p['page']}) | "
            f"[report](results/REPORT.md#{p['anchor']}) |" for p in papers]
    have = [line for line in (src / "README.md").read_text().splitlines() if re.match(r"\| \d{3} \|", line)]
    if have != want:
        problems.append("README.md's table of papers is not what papers.csv gives:\n  have: " + "\n        ".join(have) +
                        "\n  want: " + "\n        ".join(want))
    for p in papers:
        if p["anchor"] != slug(f"{p['name']} ({p['key']})"):
            problems.append(f"papers.csv: {p['key']}: anchor '{p['anchor']}' is not '{slug(p['name'] + ' (' + p['key'] + ')')}'")
        if not (src / p["page"]).is_file():
            problems.append(f"papers.csv: {p['key']}: page {p['page']} does not exist")
    for name in ("claims.csv", "values.csv"):
        used = {r["paper"] for r in csv.DictReader((ref / name).open(newline=""))}
        for k in sorted(used - set(keys)):
            problems.append(f"{name}: paper '{k}' has no row in papers.csv")
        if name == "claims.csv":
            for k in sorted(set(keys) - used):
                problems.append(f"papers.csv: paper '{k}' has no claim in claims.csv")
    sources = [f for folder in ("tools", "plots", "harness", "bench", "models", "experiments", "scripts")
               for f in (src / folder).rglob("*") if f.suffix in (".cpp", ".h", ".py", ".sh")]
    for path in sorted(sources):
        text = path.read_text()
        for p in papers:
            if p["title"] in text or f'"{p["key"]}"' in text:
                problems.append(f"{path.relative_to(src)}: types paper {p['key']} (read experiments/reference/papers.csv)")
    page = (src / "docs" / "adding_a_paper.md").read_text()
    named = re.findall(r"`([A-Za-z_./]+/[A-Za-z_./]*|[A-Za-z_]+\.(?:md|csv|sh|txt))`", page)
    for needed in ("experiments/reference/papers.csv", "experiments/reference/values.csv",
                   "experiments/reference/claims.csv", "experiments/run_all.sh", "bench/CMakeLists.txt", "README.md"):
        if needed not in named:
            problems.append(f"docs/adding_a_paper.md does not name {needed}")
    for n in named:
        if "/" not in n and n != "README.md":
            continue  # a file named by itself after its folder was (papers.csv)
        if not (src / n).exists():
            problems.append(f"docs/adding_a_paper.md names {n}, which does not exist")
    for p in problems:
        print(f"check_papers: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
