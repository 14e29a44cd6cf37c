# expect: error: (rule alignment)
# args: --shape 128,130 --dtype f32
def epi(accum, bias: "1,N"):
    D = accum + bias
    return D
