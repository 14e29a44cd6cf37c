# expect: error: reduces over the batch dimension L
# args: --shape 128,128,2
def epi(accum):
    D = accum
    r = sum(accum, dim=2)
    return D, r
