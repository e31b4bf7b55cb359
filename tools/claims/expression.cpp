#include "tools/claims/expression.h"
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include "harness/spread.h"
#include "kernels/exec.h"
#include "models/paper_values.h"

namespace moebench {

const CsvRows* ResultFiles::get(const std::string& relative) {
  auto it = files_.find(relative);
  if (it == files_.end()) {
    const std::string path = root_ + "/" + relative;
    std::unique_ptr<CsvRows> t;
    if (std::filesystem::is_regular_file(path)) {
      t = std::make_unique<CsvRows>(CsvRows::read(path));
      t->set_label(relative);
    }
    it = files_.emplace(relative, std::move(t)).first;
  }
  return it->second.get();
}

Number Number::of_repetitions(std::vector<double> reps) {
  const MedianInterval m = median_interval(reps);
  return {m.median, m.lo, m.hi, std::move(reps)};
}

namespace {

// A result that is not there: it ends the evaluation with `why`.
struct Missing {
  std::string why;
};

std::optional<double> number_of(const std::string& cell) {
  std::string s = cell;
  while (!s.empty() && (s.back() == '%' || s.back() == ' ')) s.pop_back();
  if (s.empty() || s == "-" || s == "n/a") return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool constant(const Number& n) { return n.reps.empty() && n.lo == n.hi; }

// a op b repetition by repetition, where both have as many (or one is a constant); nothing
// otherwise.
template <class Op>
std::optional<Number> paired(const Number& a, const Number& b, Op op) {
  const std::size_t n = !a.reps.empty() ? a.reps.size() : b.reps.size();
  if (n == 0) return std::nullopt;
  if (!(a.reps.size() == n || constant(a)) || !(b.reps.size() == n || constant(b))) return std::nullopt;
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = op(a.reps.empty() ? a.v : a.reps[i], b.reps.empty() ? b.v : b.reps[i]);
  return Number::of_repetitions(out);
}

Number add(Number a, Number b) {
  if (auto p = paired(a, b, [](double x, double y) { return x + y; })) return *p;
  return {a.v + b.v, a.lo + b.lo, a.hi + b.hi, {}};
}
Number sub(Number a, Number b) {
  if (auto p = paired(a, b, [](double x, double y) { return x - y; })) return *p;
  return {a.v - b.v, a.lo - b.hi, a.hi - b.lo, {}};
}
Number mul(Number a, Number b) {
  if (auto p = paired(a, b, [](double x, double y) { return x * y; })) return *p;
  const double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return {a.v * b.v, *std::min_element(p, p + 4), *std::max_element(p, p + 4), {}};
}
Number div(Number a, Number b) {
  if (!b.reps.empty()) {
    for (double y : b.reps)
      if (y == 0) throw Missing{"a division by a repetition that is 0"};
  } else if (b.lo <= 0 && b.hi >= 0) {
    throw Missing{"a division by a range that holds 0"};
  }
  if (auto p = paired(a, b, [](double x, double y) { return x / y; })) return *p;
  if (b.lo <= 0 && b.hi >= 0) throw Missing{"a division by a range that holds 0"};
  const double q[4] = {a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi};
  return {a.v / b.v, *std::min_element(q, q + 4), *std::max_element(q, q + 4), {}};
}
Number negate(const Number& n) {
  Number m{-n.v, -n.hi, -n.lo, {}};
  for (double x : n.reps) m.reps.push_back(-x);
  return m;
}

struct Filter {
  std::string column, op, value;
  bool keeps(const std::string& cell) const {
    if (op == "=") return cell == value;
    if (op == "!=") return cell != value;
    if (op == "~") return cell.find(value) != std::string::npos;
    const auto c = number_of(cell), v = number_of(value);
    if (!c || !v) return false;
    if (op == "<") return *c < *v;
    if (op == ">") return *c > *v;
    if (op == "<=") return *c <= *v;
    return *c >= *v;
  }
};

class Parser {
 public:
  Parser(const std::string& text, ResultFiles& results, Evaluation& out) : s_(text), results_(results), out_(out) {}

  Number parse() {
    const Number n = expr();
    skip();
    if (pos_ != s_.size()) fail("unexpected '" + s_.substr(pos_) + "'");
    return n;
  }

 private:
  // The row a {...} expression is evaluated on.
  struct Row {
    const CsvRows* table;
    std::size_t index;
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("claim expression '" + s_ + "': " + what + " (at " + std::to_string(pos_) + ")");
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string word(const char* extra) {
    skip();
    const std::size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || std::strchr(extra, s_[pos_])))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }

  Number expr() {
    Number n = term();
    for (;;) {
      if (eat('+'))
        n = add(n, term());
      else if (eat('-'))
        n = sub(n, term());
      else
        return n;
    }
  }
  Number term() {
    Number n = unary();
    for (;;) {
      if (eat('*'))
        n = mul(n, unary());
      else if (eat('/'))
        n = div(n, unary());
      else
        return n;
    }
  }
  Number unary() {
    if (eat('-')) return negate(unary());
    if (eat('(')) {
      const Number n = expr();
      expect(')');
      return n;
    }
    skip();
    if (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.')) {
      char* end = nullptr;
      const double v = std::strtod(s_.c_str() + pos_, &end);
      pos_ = std::size_t(end - s_.c_str());
      return Number::exact(v);
    }
    const std::string name = word("_.");
    if (name.empty()) fail("expected a number, a function or a column");
    if (!eat('(')) return column_of_row(name);
    Number n = call(name);
    expect(')');
    return n;
  }

  Number column_of_row(const std::string& column) {
    if (!row_) fail("column '" + column + "' outside a {...} row expression");
    return cell(*row_->table, row_->index, column);
  }

  static Number cell(const CsvRows& t, std::size_t r, const std::string& column) {
    if (!t.has(column)) throw Missing{t.label() + " has no column '" + column + "'"};
    const auto v = number_of(t.cell(r, column));
    if (!v) throw Missing{t.label() + ": '" + t.cell(r, column) + "' in " + column + " is no number"};
    if (t.has(column + "_reps")) {
      const std::vector<double> reps = parse_repetitions(t.cell(r, column + "_reps"));
      if (!reps.empty()) return Number::of_repetitions(reps);
    }
    Number n = Number::exact(*v);
    if (t.has(column + "_min") && t.has(column + "_max")) {
      const auto lo = number_of(t.cell(r, column + "_min")), hi = number_of(t.cell(r, column + "_max"));
      if (lo && hi) {
        n.lo = std::min(*lo, *v);
        n.hi = std::max(*hi, *v);
      }
    }
    return n;
  }

  // PATH[filters] and what to take of each row (.COLUMN or {expr}): the rows it keeps, in order.
  struct Selection {
    const CsvRows* table = nullptr;
    std::vector<std::size_t> rows;
    std::string column;          // .COLUMN
    std::size_t expr_start = 0;  // {expr}: where it starts in the text
    bool has_take = false;
  };

  Selection selection(bool needs_take) {
    Selection sel;
    const std::string path = word("_./-");
    if (path.empty()) fail("expected a results CSV path");
    expect('[');
    std::vector<Filter> filters;
    skip();
    if (!eat(']')) {
      do {
        Filter f;
        f.column = word("_.");
        skip();
        for (const char* op : {"!=", "<=", ">=", "=", "~", "<", ">"})
          if (s_.compare(pos_, std::strlen(op), op) == 0) {
            f.op = op;
            pos_ += std::strlen(op);
            break;
          }
        if (f.column.empty() || f.op.empty()) fail("expected a filter COLUMN op VALUE");
        skip();
        const std::size_t start = pos_;
        while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ']') ++pos_;
        f.value = s_.substr(start, pos_ - start);
        while (!f.value.empty() && f.value.back() == ' ') f.value.pop_back();
        filters.push_back(f);
      } while (eat(','));
      expect(']');
    }
    out_.files.insert(path);
    sel.table = results_.get(path);
    if (!sel.table) throw Missing{path + " is not in the results folder"};
    for (const Filter& f : filters)
      if (!sel.table->has(f.column)) throw Missing{path + " has no column '" + f.column + "'"};
    for (std::size_t r = 0; r < sel.table->size(); ++r)
      if (std::all_of(filters.begin(), filters.end(), [&](const Filter& f) { return f.keeps(sel.table->cell(r, f.column)); }))
        sel.rows.push_back(r);
    if (eat('.')) {
      sel.column = word("_.");
      sel.has_take = true;
    } else if (eat('{')) {
      sel.expr_start = pos_;
      skip_braces();
      sel.has_take = true;
    } else if (needs_take) {
      fail("expected .COLUMN or {expr} after the selection");
    }
    if (sel.rows.empty()) throw Missing{path + ": no row matches " + describe(filters)};
    out_.rows[path].insert(sel.rows.begin(), sel.rows.end());
    return sel;
  }

  static std::string describe(const std::vector<Filter>& filters) {
    std::string d = "[";
    for (std::size_t i = 0; i < filters.size(); ++i) d += (i ? ", " : "") + filters[i].column + filters[i].op + filters[i].value;
    return d + "]";
  }

  // Past the {...} just opened (its contents are evaluated per row by take()).
  void skip_braces() {
    int depth = 1;
    while (pos_ < s_.size() && depth > 0) {
      if (s_[pos_] == '{') ++depth;
      if (s_[pos_] == '}') --depth;
      ++pos_;
    }
    if (depth) fail("unclosed '{'");
  }

  // What the selection takes of row r (nullopt: no number there; last_missing_ says why).
  std::optional<Number> take(const Selection& sel, std::size_t r) {
    if (!sel.column.empty()) {
      try {
        return cell(*sel.table, r, sel.column);
      } catch (const Missing& m) {
        last_missing_ = m.why;
        return std::nullopt;
      }
    }
    // The row expression is parsed again for each row, from where it starts in the text.
    struct Restore {
      Parser& p;
      std::size_t pos;
      std::optional<Row> row;
      ~Restore() { p.pos_ = pos, p.row_ = row; }
    } restore{*this, pos_, row_};
    pos_ = sel.expr_start;
    row_ = Row{sel.table, r};
    try {
      const Number n = expr();
      expect('}');
      return n;
    } catch (const Missing& m) {
      last_missing_ = m.why;
      return std::nullopt;
    }
  }

  Number call(const std::string& f) {
    if (f == "paper") {
      const std::string id = word("_.-");
      return Number::exact(paper_number(id));
    }
    if (f == "abs") {
      const Number n = expr();
      if (!n.reps.empty()) {
        std::vector<double> a;
        for (double x : n.reps) a.push_back(std::fabs(x));
        return Number::of_repetitions(a);
      }
      if (n.lo >= 0) return n;
      if (n.hi <= 0) return negate(n);
      return {std::fabs(n.v), 0, std::max(-n.lo, n.hi), {}};
    }
    if (f == "span") {  // a number and the ends of its range, each computed apart (a count's, say)
      const Number v = expr();
      expect(',');
      const Number lo = expr();
      expect(',');
      const Number hi = expr();
      return {v.v, std::min(lo.v, v.v), std::max(hi.v, v.v), {}};
    }
    if (f == "count") return Number::exact(double(selection(false).rows.size()));
    const Selection sel = selection(true);
    if (f == "distinct") {
      std::set<std::string> seen;
      for (std::size_t r : sel.rows) seen.insert(sel.table->cell(r, sel.column));
      return Number::exact(double(seen.size()));
    }
    if (f == "at_max" || f == "at_min") {
      expect(',');
      const std::string key = word("_.");
      if (!sel.table->has(key)) throw Missing{sel.table->label() + " has no column '" + key + "'"};
      std::optional<std::size_t> best;
      double best_key = 0;
      for (std::size_t r : sel.rows) {
        const auto k = number_of(sel.table->cell(r, key));
        if (k && (!best || (f == "at_max" ? *k > best_key : *k < best_key))) best = r, best_key = *k;
      }
      if (!best) throw Missing{sel.table->label() + ": no number in " + key};
      const auto n = take(sel, *best);
      if (!n) throw Missing{sel.table->label() + ": no number in the row where " + key + " is " + (f == "at_max" ? "largest" : "smallest")};
      return *n;
    }
    std::vector<Number> values;
    for (std::size_t r : sel.rows)
      if (const auto n = take(sel, r)) values.push_back(*n);
    if (f == "value") {
      if (sel.rows.size() != 1)
        throw Missing{sel.table->label() + ": " + std::to_string(sel.rows.size()) + " rows match where value() wants one"};
      if (values.empty()) throw Missing{last_missing_};
      return values.front();
    }
    if (values.empty()) throw Missing{last_missing_.empty() ? sel.table->label() + ": no number in the matching rows" : last_missing_};
    // Over the rows: repetition by repetition where every row has as many; else the medians and
    // each end of the ranges apart.
    auto over = [&](auto pick) {
      const std::size_t n = values.front().reps.size();
      const bool pairs = n > 0 && std::all_of(values.begin(), values.end(), [n](const Number& x) { return x.reps.size() == n; });
      if (pairs) {
        std::vector<double> per_rep(n);
        for (std::size_t i = 0; i < n; ++i) {
          std::vector<double> across;
          for (const Number& x : values) across.push_back(x.reps[i]);
          per_rep[i] = pick(across);
        }
        return Number::of_repetitions(per_rep);
      }
      std::vector<double> v, lo, hi;
      for (const Number& x : values) v.push_back(x.v), lo.push_back(x.lo), hi.push_back(x.hi);
      return Number{pick(v), pick(lo), pick(hi), {}};
    };
    if (f == "max") return over([](std::vector<double> x) { return *std::max_element(x.begin(), x.end()); });
    if (f == "min") return over([](std::vector<double> x) { return *std::min_element(x.begin(), x.end()); });
    if (f == "sum") return over([](std::vector<double> x) { double s = 0; for (double y : x) s += y; return s; });
    if (f == "mean")
      return over([](std::vector<double> x) { double s = 0; for (double y : x) s += y; return s / double(x.size()); });
    if (f == "median")
      return over([](std::vector<double> x) {
        std::sort(x.begin(), x.end());
        const std::size_t m = x.size() / 2;
        return x.size() % 2 ? x[m] : 0.5 * (x[m - 1] + x[m]);
      });
    fail("unknown function '" + f + "'");
  }

  const std::string& s_;
  ResultFiles& results_;
  Evaluation& out_;
  std::size_t pos_ = 0;
  std::optional<Row> row_;
  std::string last_missing_;
};

}  // namespace

Evaluation evaluate(const std::string& expression, ResultFiles& results) {
  Evaluation e;
  try {
    e.value = Parser(expression, results, e).parse();
  } catch (const Missing& m) {
    e.value.reset();
    e.missing = m.why;
  }
  return e;
}

}  // namespace moebench
