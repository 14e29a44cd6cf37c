# expect: accept
def epi(accum, bias: "1,N"):
    D = accum + bias
    E = D * D
    F = sum(E, dim=1)
    return D, E, F
