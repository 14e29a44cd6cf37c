# expect: accept
# CUTLASS PassDAG2Tree emits a binary op with one child for this DAG.
def epi(accum):
    a = accum * 2
    l = a + accum
    D = l + a
    return D
