# expect: accept
def epi(accum, C):
    E = accum + C
    F = relu(E)
    G = F * 2
    D = G + E
    return D, E, F, G
