// The papers' numbers, typed once in experiments/reference/values.csv (id, paper, where, row,
// column, value, unit, kind, note), for the benches, tools and the claim ledger to read: no
// paper value is a literal in the code (tests/cli/check_reference.py holds the code to that).
#pragma once
#include <string>
#include <vector>

namespace moebench {

struct PaperValue {
  std::string id, paper, where, row, column, unit, kind, note;
  double value = 0;
};

// The reference folder: $MOEBENCH_REFERENCE, else experiments/reference of the checkout the
// running binary sits in, else of the source tree it was built from.
std::string reference_dir();
// Every value, in the file's order (read once).
const std::vector<PaperValue>& paper_values();
// By id; throws Error naming the id and the file when there is none.
const PaperValue& paper_value(const std::string& id);
inline double paper_number(const std::string& id) { return paper_value(id).value; }

}  // namespace moebench
