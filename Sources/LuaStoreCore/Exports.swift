/// `Protected` (a value behind a lock) is part of this module's API; it lives in `LuaStoreConcurrency`, below
/// both LuaKit and LuaStoreCore.
@_exported import LuaStoreConcurrency
