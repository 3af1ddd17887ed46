// A result upload's body: split whole (unpack_result_upload, the format's reference), and as
// the server reads it from the socket, in pieces, into a spool file
// (server/core/storage/upload_spool.h).
#include <algorithm>
#include <filesystem>

#include "fuzz_target.h"
#include "result_upload.h"
#include "upload_spool.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    (void)common::unpack_result_upload({data, size});
    server::SpooledUpload upload;  // removes its spool file when it goes
    upload.directory = fuzz_scratch_directory();
    {
        server::SpoolWriter writer(upload);
        writer.open();
        // Pieces of the sizes the first byte says, as reads from a socket come.
        std::size_t piece = size > 0 ? data[0] % 64 + 1 : 1;
        for (std::size_t at = 0; at < size; at += piece) writer.write(data + at, std::min(piece, size - at));
        writer.finish();
    }
    return 0;
}

std::vector<common::Bytes> fuzz_seeds() {
    common::Bytes delta(300);
    for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = static_cast<std::uint8_t>(i);
    return {common::pack_result_upload(R"({"wu_id": "a-1"})", delta), common::pack_result_upload("{}", {})};
}
