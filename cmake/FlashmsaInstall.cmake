# install() + find_package(flashmsa CONFIG) + pkg-config (filled in later)
