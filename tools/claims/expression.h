// The expressions the claim ledger evaluates over a results folder (experiments/reference/
// claims.csv says, per claim, how each setting's number is computed):
//   expr      := term (('+' | '-') term)*          term := unary (('*' | '/') unary)*
//   unary     := '-' unary | NUMBER | '(' expr ')' | FUNC '(' args ')' | COLUMN (inside {...})
//   FUNC      := paper(ID) | abs(expr) | span(expr, expr, expr)
//              | value(SEL) | max(SEL) | min(SEL) | mean(SEL) | median(SEL) | sum(SEL)
//              | count(SEL) | distinct(SEL) | at_max(SEL, COLUMN) | at_min(SEL, COLUMN)
//   SEL       := PATH '[' FILTER (',' FILTER)* ']' ('.' COLUMN | '{' expr '}')
//   FILTER    := COLUMN ('=' | '!=' | '~' | '<' | '>' | '<=' | '>=') VALUE    (~: contains)
// e.g. min(ppmoe/t2.csv[model=DPMoE].step_ms) / value(ppmoe/t2.csv[model=PPMoE].step_ms).
// PATH is relative to the results folder; paper(ID) is experiments/reference/values.csv's.
// Every number carries the run's spread. Where the CSV has c_reps (the repetitions in the order
// they ran, interleaved with the other cases': harness/bench.h), a cell of column c is those
// repetitions: arithmetic and aggregates pair them (repetition i with repetition i), and the
// number is the median of the paired results with the order-statistic confidence interval of
// that median (harness/spread.h). Otherwise a cell is its median with [c_min, c_max] where the
// CSV has those columns, and arithmetic carries the range (every combination of the ends: never
// narrower than the run's), so the ledger can tell when the spread alone decides a verdict.
// span(V, LO, HI) is V's number with the range [LO, HI] (what the spread allows of a count, say,
// computed from other columns). value() wants exactly one row;
// at_max / at_min take the row where COLUMN is largest / smallest. "n/a", "-" and "" are no
// number: an aggregate skips them, value() does not.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include "models/csv_rows.h"

namespace moebench {

struct Number {
  double v = 0, lo = 0, hi = 0;  // the median, and the run's range around it
  std::vector<double> reps;      // paired repetitions, where the CSVs had them
  static Number exact(double x) { return {x, x, x, {}}; }
  // The median of `reps` and its confidence interval.
  static Number of_repetitions(std::vector<double> reps);
};

// The results folder's CSVs, each read once.
class ResultFiles {
 public:
  explicit ResultFiles(std::string root) : root_(std::move(root)) {}
  // nullptr where the file is not there.
  const CsvRows* get(const std::string& relative);

 private:
  std::string root_;
  std::map<std::string, std::unique_ptr<CsvRows>> files_;
};

struct Evaluation {
  std::optional<Number> value;
  std::string missing;          // why there is no number (no file, no row, no column), if none
  std::set<std::string> files;  // the CSVs it read, relative to the root
  std::map<std::string, std::set<std::size_t>> rows;  // the rows its selections kept, by CSV
};

// Throws Error for an expression that does not parse (a mistake in claims.csv, not in a run).
Evaluation evaluate(const std::string& expression, ResultFiles& results);

}  // namespace moebench
