// The papers the suite reproduces, as data: experiments/reference/papers.csv, one row each (key,
// name, title, the report's anchor for its section, its docs page, what the suite takes from it).
// The report, the plots and the README's table read it; a new paper is a row here
// (docs/adding_a_paper.md).
#pragma once
#include <string>
#include <vector>

namespace moebench {

struct Paper {
  std::string key, name, title, anchor, page, covers;
};

// Throws Error naming the file where it cannot be read, a column is missing, a cell is empty or a
// key repeats.
std::vector<Paper> read_papers(const std::string& path);

}  // namespace moebench
