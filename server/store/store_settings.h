// The store's settings (the operator token's hash, the server key's id, the stall guard's
// suspensions; store.cpp, store_checks.cpp). One part of Store (store.h): a component given only
// this part sees only these calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "records.h"
#include "result.h"
#include "store_core.h"

namespace tessera::server {

class SettingStore : protected virtual StoreCore {
public:
    // Settings (operator token hash, server key id).
    common::Status set_setting(const std::string& key, const std::string& value);
    common::Result<std::optional<std::string>> setting(const std::string& key);
    // Every setting whose key starts with `prefix`, by key.
    common::Result<std::vector<std::pair<std::string, std::string>>> settings_with_prefix(const std::string& prefix);
    common::Status remove_setting(const std::string& key);

protected:
    SettingStore() = default;
};

}  // namespace tessera::server
