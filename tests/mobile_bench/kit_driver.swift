// The tests' own main for the bench kit's Swift that needs no Core ML (KitConfig.swift, TokenizerCheck.swift, as
// `pocketbert bench kit` writes them), built with them on Linux by test_kit_swift_on_linux.py; never shipped.
//   kit-driver plan <kit_config.json>        the measurements the kit plans, as a JSON list
//   kit-driver tokenizer <tables> <golden>   checkTokenizer's result, as JSON
import Foundation

func emit(_ value: Any) throws {
    FileHandle.standardOutput.write(try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]))
}

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "plan" where arguments.count == 3:
    let config = try KitConfig.decoded(from: Data(contentsOf: URL(fileURLWithPath: arguments[2])))
    try emit(measurementPlan(config).map { planned -> [String: Any] in
        ["name": planned.name, "function": planned.function ?? NSNull(), "sequence_length": planned.sequenceLength,
         "sha256": planned.program.sha256, "compute_units": planned.program.compute_units]
    })
case "tokenizer" where arguments.count == 4:
    try emit(checkTokenizer(tables: URL(fileURLWithPath: arguments[2]), golden: URL(fileURLWithPath: arguments[3])))
default:
    FileHandle.standardError.write(Data("usage: kit-driver plan CONFIG | kit-driver tokenizer TABLES GOLDEN\n".utf8))
    exit(2)
}
