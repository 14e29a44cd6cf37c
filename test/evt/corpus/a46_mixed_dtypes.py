# expect: accept
# args: --dtype bf16 --dtype C=f16,bias=f32,E=f32
def epi(accum, C, bias: "1,N"):
    E = accum + bias
    D = E + C
    return D, E
