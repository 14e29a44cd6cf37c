# expect: accept
# sm90: beta * C + Z with beta == 0 takes CUTLASS's run-time path that skips loading C.
def epi(accum, C):
    D = 0.0 * C + accum
    return D
