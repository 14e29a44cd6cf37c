# expect: error: (rule output-param)
def epi(accum, E):
    D = accum + E
    E = D
    return D, E
