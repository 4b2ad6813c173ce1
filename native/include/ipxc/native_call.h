// A native call prepared in one extension module and made by another (a plain C struct, so the two modules need
// not share C++ types): ipexconvert._dnnl's bound layer calls hand one to ipexconvert._native's capture()
// (python/capture.cpp), which makes it between its own kernels with no Python in between. The module that made
// it keeps `context` alive as long as the Python object that handed it out lives.
#ifndef IPXC_NATIVE_CALL_H
#define IPXC_NATIVE_CALL_H

extern "C" {
struct IpxcNativeCall {
    // Makes the call; nullptr when it succeeded, else the error (valid until this thread's next call of run).
    const char* (*run)(void* context);
    void* context;
};
}

// The PyCapsule name under which such a call travels (the object's `native_call` attribute).
#define IPXC_NATIVE_CALL_CAPSULE "ipexconvert.native_call"

#endif
