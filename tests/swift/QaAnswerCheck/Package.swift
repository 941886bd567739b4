// swift-tools-version:5.9
// Runs the generated QA routine (QaAnswer.swift, copied into Sources/QaAnswerCheck by the test that builds this)
// with pocketbert's Swift tokenizer package.
import PackageDescription

let package = Package(
    name: "QaAnswerCheck",
    dependencies: [.package(path: "../../../pocketbert/export/app/swift/PocketBertTokenizer")],
    targets: [
        .executableTarget(name: "QaAnswerCheck",
                          dependencies: [.product(name: "PocketBertTokenizer", package: "PocketBertTokenizer")]),
    ]
)
