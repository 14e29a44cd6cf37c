# expect: accept
# args: --shape 128,256,2 --dtype f16 --dtype E=f32
def epi(accum, C, s: "M,1,L"):
    x = accum * s - C
    E = sigmoid(x)
    m = max(E, dim=0)
    D = x
    return D, E, m
