// Whether a run's ranks each had a processor: on the CPU backend the ranks of one machine share
// its cores, and a rank waiting for a core is neither computing nor waiting for its peers -- the
// time goes to whichever phase (or pipeline bubble) it was in. The CSVs whose claims depend on
// that (a step's phase split, a pipeline's bubble) rest on it: every CSV a run writes says so in its
// `processors` provenance column (harness/provenance.h), and the claim ledger reads it
// (tools/claims/ledger.cpp, relevant_hardware core_per_rank and core_per_stage).
#pragma once
#include <string>
#include "kernels/exec.h"
#include "runtime/runtime.h"

namespace moebench {

// How many ops the ranks of one machine can run at once when that is fewer than the ranks (cores
// over the BLAS threads of one op, as the experiments launch them); 0 where every rank has a
// processor of its own: a GPU each, or cores enough on each machine. A machine is a kernel's boot
// id (Runtime::ranks_per_machine), so namespaced nodes of one machine share its cores.
int cores_shared_by_ranks(const Runtime& rt, Backend backend);

// The `processors` cell: "2 cores shared by the 4 ranks", "2 cores shared by the 4 ranks of 2
// nodes on one machine", or "one per rank".
std::string processors_cell(const Runtime& rt, Backend backend);

}  // namespace moebench
