//! Named transport profiles (in progress).
