# expect: accept
# args: --dtype a=f32,b=bf16,c=bf16,d=f32,e=bf16
# Five auxiliary outputs (two f32, three bf16) beside C and D, from row and column broadcasts: the
# epilogue's shared memory on sm90 leaves the mainloop 2 stages, the fewest CUTLASS compiles
# (e34 with five f32 outputs leaves 0). test/evt/compile_corpus.py compiles it.
def epi(accum, C, bias: "1,N", s: "M,1"):
    a = accum + bias
    b = a * s
    c = relu(a) + C
    d = b - bias
    e = c * s
    D = a + b
    return D, a, b, c, d, e
