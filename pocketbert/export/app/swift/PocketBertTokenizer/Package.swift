// swift-tools-version:5.9
// BERT WordPiece for iOS apps, read from the tokenizer.tables file `pocketbert export` writes. No dependencies.
import PackageDescription

let package = Package(
    name: "PocketBertTokenizer",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "PocketBertTokenizer", targets: ["PocketBertTokenizer"]),
        .executable(name: "pocketbert-tokenize", targets: ["pocketbert-tokenize"]),
    ],
    targets: [
        .target(name: "PocketBertTokenizer"),
        .executableTarget(name: "pocketbert-tokenize", dependencies: ["PocketBertTokenizer"]),
        .testTarget(name: "PocketBertTokenizerTests", dependencies: ["PocketBertTokenizer"]),
    ]
)
