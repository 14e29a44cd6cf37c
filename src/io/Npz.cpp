// npz reading and writing (filled in below).
namespace coil {}
