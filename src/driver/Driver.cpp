// Driver library (filled in with the pipeline).
namespace coil {}
