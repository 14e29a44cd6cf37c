# expect: accept
# args: --dtype f32
def epi(accum, C, alpha: "scalar"):
    D = alpha * accum + C
    E = tanh(D)
    return D, E
