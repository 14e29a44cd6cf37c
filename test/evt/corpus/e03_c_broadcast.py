# expect: error: (rule c-dense)
# CUTLASS accepts C of shape (M,1) as a zero-stride TMA source.
def epi(accum, C: "M,1"):
    D = accum + C
    return D
