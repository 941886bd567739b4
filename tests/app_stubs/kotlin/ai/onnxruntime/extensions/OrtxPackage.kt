// STUB for compiling pocketbert's generated Kotlin on Linux only; never shipped, never run. onnxruntime-extensions'
// Android package (com.microsoft.onnxruntime:onnxruntime-extensions-android), only what the text-in template calls,
// as its documentation shows it: https://onnxruntime.ai/docs/extensions/#android
package ai.onnxruntime.extensions

object OrtxPackage {
    // https://onnxruntime.ai/docs/extensions/#android (sessionOptions.registerCustomOpLibrary(OrtxPackage.getLibraryPath()))
    @JvmStatic fun getLibraryPath(): String = throw UnsupportedOperationException("stub")
}
