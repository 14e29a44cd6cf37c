# expect sm90: error: shared-memory budget
# expect sm80: accept
# args: --dtype a=f32,b=f32,c=f32,d=f32,e=f32
# Issue 15: five f32 auxiliary outputs need 5 x 32768 bytes of shared memory on sm90 beside the
# collective's C and D buffers, which leaves the GEMM's mainloop 1 stage; nvcc then fails with
# "Specialization requires Stages set to value 2 or more". coil rejects it, naming the largest
# buffers. sm80's visitors store without shared memory: accepted there.
def epi(accum, C, bias: "1,N", s: "M,1"):
    a = accum + bias
    b = a * s
    c = relu(a) + C
    d = b - bias
    e = c * s
    D = a + b
    return D, a, b, c, d, e
