# expect: accept
# cutlass#2309: a dead user branch; coil removes it (DCE).
def epi(accum, bias: "1,N"):
    E = accum + 1
    F = E + bias
    D = E * 2
    return D
